"""Executor overhead: ``autoplan.parallelize`` against the same layout written by hand in torch.

    python benchmarks/executor_overhead.py                      # gpt-small, 4 gloo CPU processes
    python benchmarks/executor_overhead.py --steps 6 --warmup 1 --model gpt-tiny

For each layout (DP4 ZeRO-0, DP4 ZeRO-3, TP2 x DP2, PP2 x DP2 1F1B) both versions are built in the
same 4 processes from the same initial weights: autoplan from a ``Layout``, the native one by the
code of this file alone (``init_device_mesh``, ``DistributedDataParallel``, ``fully_shard``,
``parallelize_module``, ``PipelineStage`` + ``Schedule1F1B``; no ``autoplan.execute`` code). After
warm-up the two take turns step by step (ABBA order, so both see the same machine noise and neither
always goes first), one step being forward, backward and an SGD step of the global batch, timed on
rank 0 between two barriers. Rank 0 prints the median step time of each, their ratio, the median
of the ratios within a round (``paired``, less sensitive to other load drifting in), and the ratio
of median CPU seconds per step summed over ranks (``cpu_ratio``: the work each side does, which
other jobs on the machine do not inflate; it misses time lost waiting at extra synchronisations)::

    layout            autoplan_s  native_s   ratio  paired  cpu_ratio
    dp4 zero0             0.6678    0.6600   1.012   1.010      1.004

The native loops do what a hand-written training script needs and no more: they do not reduce the
loss over ranks each step. The autoplan side gets the global mean loss every step as a training
script does (``Parallelized.step_async``: the loss's all-reduce runs during the optimizer step).
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing as mp
import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from autoplan.models.shapes import BUILTIN_SHAPES, ModelShape  # noqa: E402
from autoplan.models.transformer import build_model  # noqa: E402

WORLD = 4
LR = 0.01


@dataclass(frozen=True)
class Case:
    """One layout: its autoplan ``Layout`` keys and the native builder's name."""

    name: str
    layout: dict
    native: str


def cases(layers: int, global_batch: int) -> list[Case]:
    """The benchmarked layouts for a model of ``layers`` blocks and a global batch (multiple of 8)."""
    units = ["embed"] + [f"block.{i}" for i in range(layers)] + ["head"]
    half = len(units) // 2
    pp_stages = [units[:half], units[half:]]
    mb = global_batch // 4  # rows per DP rank of DP4 and per micro-batch pair
    return [
        Case("dp4 zero0", dict(dp=4, mbs=mb // 2, num_microbatches=2, zero=0), "ddp"),
        Case("dp4 zero3", dict(dp=4, mbs=mb // 2, num_microbatches=2, zero=3), "fsdp3"),
        Case("tp2xdp2 zero0", dict(dp=2, tp=2, mbs=mb, num_microbatches=2, zero=0), "tp_fsdp"),
        Case("pp2xdp2 1f1b", dict(dp=2, pp=2, mbs=mb // 2, num_microbatches=4, zero=0, schedule="1f1b",
                                  stages=pp_stages), "pp_fsdp"),
    ]


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean token cross-entropy: logits ``[b, s, vocab]``, labels ``[b, s]``."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


# -- the native versions: torch.distributed only ---------------------------------------------------

COLWISE = ("attn.wq", "attn.wk", "attn.wv", "mlp.w1")
ROWWISE = ("attn.wo", "mlp.w2")

StepFn = Callable[[torch.Tensor, torch.Tensor], Callable[[], float] | None]
"""``step(tokens, labels)``: forward and backward of the global batch ``[B, s]`` (this rank slices it);
may return a function giving the step's loss, called after the optimizer step"""


def _rows(batch: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    per = batch.shape[0] // size
    return batch[rank * per:(rank + 1) * per]


def native_ddp(model: nn.Module, n_micro: int) -> tuple[list[nn.Parameter], StepFn]:
    """DP over all ranks with DDP; gradient sync on the last micro-batch only."""
    ddp = nn.parallel.DistributedDataParallel(model)
    rank, world = dist.get_rank(), dist.get_world_size()

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> None:
        t, y = _rows(tokens, rank, world), _rows(labels, rank, world)
        for i, (tm, ym) in enumerate(zip(t.chunk(n_micro), y.chunk(n_micro))):
            ddp.require_backward_grad_sync = i == n_micro - 1
            (cross_entropy(ddp(tm), ym) / n_micro).backward()

    return list(ddp.parameters()), step


def native_fsdp(model: nn.Module, n_micro: int, *, reshard: bool, tp: int = 1) -> tuple[list[nn.Parameter], StepFn]:
    """FSDP2 over the dp dim (per block, then root), with Megatron TP over an inner tp dim if ``tp > 1``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    if tp > 1:
        plan = {**{k: ColwiseParallel() for k in COLWISE}, **{k: RowwiseParallel() for k in ROWWISE}}
        for block in model.blocks.values():
            parallelize_module(block, mesh["tp"], plan)
    for block in model.blocks.values():
        fully_shard(block, mesh=mesh["dp"], reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh["dp"], reshard_after_forward=reshard)
    dp_rank, dp = mesh.get_local_rank("dp"), world // tp

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> None:
        t, y = _rows(tokens, dp_rank, dp), _rows(labels, dp_rank, dp)
        for i, (tm, ym) in enumerate(zip(t.chunk(n_micro), y.chunk(n_micro))):
            model.set_requires_gradient_sync(i == n_micro - 1)
            (cross_entropy(model(tm), ym) / n_micro).backward()

    return list(model.parameters()), step


def native_pp(model: nn.Module, n_micro: int, stages: list[list[str]]) -> tuple[list[nn.Parameter], StepFn]:
    """Two pipeline stages (1F1B) over the outer dim, FSDP2 without resharding over the inner dp dim."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    world = dist.get_world_size()
    pp = len(stages)
    mesh = init_device_mesh("cpu", (pp, world // pp), mesh_dim_names=("pp", "dp"))
    pp_rank, dp_rank, dp = mesh.get_local_rank("pp"), mesh.get_local_rank("dp"), world // pp
    stage = copy.deepcopy(model).keep_units(stages[pp_rank])  # the model's own method: delete other units
    for block in stage.blocks.values():
        fully_shard(block, mesh=mesh["dp"], reshard_after_forward=False)
    fully_shard(stage, mesh=mesh["dp"], reshard_after_forward=False)
    schedule = Schedule1F1B(PipelineStage(stage, pp_rank, pp, torch.device("cpu"), group=mesh.get_group("pp")),
                            n_microbatches=n_micro, loss_fn=cross_entropy)

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> None:
        t, y = _rows(tokens, dp_rank, dp), _rows(labels, dp_rank, dp)
        # return_outputs=False: the script needs the losses, not the logits of every micro-batch
        if pp_rank == 0:
            schedule.step(t, return_outputs=False)
        elif pp_rank == pp - 1:
            schedule.step(target=y, losses=[], return_outputs=False)
        else:
            schedule.step(return_outputs=False)

    return list(stage.parameters()), step


def build_native(case: Case, model: nn.Module) -> tuple[list[nn.Parameter], StepFn]:
    n = case.layout["num_microbatches"]
    if case.native == "ddp":
        return native_ddp(model, n)
    if case.native == "fsdp3":
        return native_fsdp(model, n, reshard=True)
    if case.native == "tp_fsdp":
        return native_fsdp(model, n, reshard=False, tp=case.layout["tp"])
    if case.native == "pp_fsdp":
        return native_pp(model, n, case.layout["stages"])
    raise ValueError(f"unknown native layout {case.native!r}")


# -- autoplan ----------------------------------------------------------------------------------------

def build_autoplan(case: Case, model: nn.Module) -> tuple[list[nn.Parameter], StepFn]:
    from autoplan.execute.apply import parallelize
    from autoplan.plan.plan import Layout

    par = parallelize(model, Layout.from_dict(case.layout))

    def step(tokens: torch.Tensor, labels: torch.Tensor) -> Callable[[], float]:
        return par.step_async(par.batch_slice(tokens), par.batch_slice(labels)).value

    return list(par.parameters()), step


# -- timing ------------------------------------------------------------------------------------------

def timed_step(step: StepFn, opt: torch.optim.Optimizer, tokens: torch.Tensor, labels: torch.Tensor
               ) -> tuple[float, float]:
    """``(wall seconds on rank 0, CPU seconds summed over ranks)`` of one training step.

    Wall time runs from a barrier to a barrier. CPU time (``time.process_time``: every thread of
    the process, gloo's included; a blocked wait costs none) is the work done, insensitive to other
    jobs taking the cores; it is summed over ranks after the timed region.
    """
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    loss = step(tokens, labels)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if loss is not None:
        loss()  # autoplan: the global mean loss, all-reduced during the optimizer step
    dist.barrier()
    wall, cpu = time.perf_counter() - t0, torch.tensor(time.process_time() - c0, dtype=torch.float64)
    dist.all_reduce(cpu)
    return wall, float(cpu)


@dataclass(frozen=True)
class Timing:
    """Step times of one layout, both sides."""

    autoplan_s: list[float]
    native_s: list[float]
    autoplan_cpu_s: list[float]
    """CPU seconds per step, summed over ranks"""
    native_cpu_s: list[float]

    @property
    def cpu_ratio(self) -> float:
        """median autoplan CPU time per step over median native CPU time"""
        return statistics.median(self.autoplan_cpu_s) / statistics.median(self.native_cpu_s)

    @property
    def ratio(self) -> float:
        """median autoplan step time over median native step time"""
        return statistics.median(self.autoplan_s) / statistics.median(self.native_s)

    @property
    def paired_ratio(self) -> float:
        """median over rounds of autoplan/native within a round (robust to slow drifts of the machine)"""
        return statistics.median(a / n for a, n in zip(self.autoplan_s, self.native_s, strict=True))


def bench_case(case: Case, shape: ModelShape, *, steps: int, warmup: int, seed: int = 0) -> Timing:
    """Step times of one layout, autoplan and native interleaved."""
    from autoplan.execute.data import synthetic_batch

    global_batch = case.layout.get("dp", 1) * case.layout.get("mbs", 1) * case.layout["num_microbatches"]
    sides = {}
    for side, build in (("autoplan", build_autoplan), ("native", build_native)):
        params, step = build(case, build_model(shape, seed=seed))
        sides[side] = (step, torch.optim.SGD(params, lr=LR))
    times: dict[str, list[float]] = {"autoplan": [], "native": []}
    cpu: dict[str, list[float]] = {"autoplan": [], "native": []}
    for i in range(warmup + steps):
        tokens, labels = synthetic_batch(i, global_batch, shape.seq_len, shape.vocab, seed)
        order = ("autoplan", "native") if i % 2 == 0 else ("native", "autoplan")  # ABBA
        for side in order:
            step, opt = sides[side]
            dt, dc = timed_step(step, opt, tokens, labels)
            if i >= warmup:
                times[side].append(dt)
                cpu[side].append(dc)
    return Timing(autoplan_s=times["autoplan"], native_s=times["native"], autoplan_cpu_s=cpu["autoplan"],
                  native_cpu_s=cpu["native"])


def worker(rank: int, port: int, shape: ModelShape, global_batch: int, steps: int, warmup: int,
           names: list[str] | None) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        chosen = [c for c in cases(shape.layers, global_batch) if names is None or c.name in names]
        if rank == 0:
            print(f"model {shape.name}: layers={shape.layers} hidden={shape.hidden} vocab={shape.vocab} "
                  f"seq={shape.seq_len}; global batch {global_batch}; {WORLD} gloo processes, 1 thread each; "
                  f"{warmup} warm-up + {steps} timed steps per side", flush=True)
            print(f"{'layout':<16}{'autoplan_s':>12}{'native_s':>10}{'ratio':>8}{'paired':>8}{'cpu_ratio':>11}",
                  flush=True)
        for case in chosen:
            t = bench_case(case, shape, steps=steps, warmup=warmup)
            if rank == 0:
                print(f"{case.name:<16}{statistics.median(t.autoplan_s):>12.4f}{statistics.median(t.native_s):>10.4f}"
                      f"{t.ratio:>8.3f}{t.paired_ratio:>8.3f}{t.cpu_ratio:>11.3f}", flush=True)
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="gpt-small", help="built-in shape name")
    p.add_argument("--global-batch", type=int, default=8, help="rows per step (a multiple of 8)")
    p.add_argument("--seq-len", type=int, default=None, help="override the shape's sequence length")
    p.add_argument("--steps", type=int, default=20, help="timed steps per side and layout")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--layouts", default=None, help="comma-separated subset of the layout names")
    args = p.parse_args(argv)
    if args.global_batch % 8:
        p.error("--global-batch must be a multiple of 8")
    shape = BUILTIN_SHAPES[args.model]
    if args.seq_len is not None:
        shape = ModelShape.from_dict({**shape.to_dict(), "seq_len": args.seq_len})
    names = [s.strip() for s in args.layouts.split(",")] if args.layouts else None
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, port, shape, args.global_batch, args.steps, args.warmup, names))
             for r in range(WORLD)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return max(abs(proc.exitcode or 0) for proc in procs)


if __name__ == "__main__":
    sys.exit(main())
