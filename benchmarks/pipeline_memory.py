"""Pipeline memory: peak memory per pipeline rank against the number of micro-batches, with torch's
stock receive buffers and with autoplan's just-in-time ones, measured beside predicted.

    python benchmarks/pipeline_memory.py               # gpt-small at seq_len 256, pp=4, m = 4, 8, 16, 32
    python benchmarks/pipeline_memory.py --micro-batches 4,8 --schedules 1f1b --seq-len 128
    python benchmarks/pipeline_memory.py --measurements /tmp/peaks.json   # measure once, re-predict later

On 4 gloo CPU processes (pp = 4; interleaved: vp = 2) the model is cut into even stages and trained
with AdamW, fp32, mbs 1, for ``--steps`` steps per run, under GPipe, 1F1B and interleaved 1F1B, each
with ``jit_recv_buffers`` off (torch.distributed.pipelining's own allocation: a receive buffer per
micro-batch for the whole step) and on (:mod:`autoplan.execute.pp_buffers`).

Measured: torch's profiler memory events (``profile_memory=True``): every byte the CPU allocator
hands out or takes back while the profiler runs, whatever allocator serves it. The profiler starts
before the model is built, so parameters and optimizer state are in the count; the peak is the
highest running total inside the last step (forward, backward and optimizer step), i.e. the most
bytes of tensors alive at once. Predicted: autoplan's cost model (``estimate``) for that layout,
from a profile of the model's layers measured first on this machine (mbs 1, at ``--seq-len``; or
``--model-profile``) and the shipped 4-process CPU cluster profile. A sequence of 256 makes the
boundary tensors (256 KiB per micro-batch; the logits 4 MiB) a visible part of a rank's memory. Per run and rank it
prints::

    schedule  m  rank  stock_MiB  jit_MiB  predicted_MiB  pred/jit  buffers_MiB  recv_stock  recv_jit  bwd_done  pred_grads

``buffers_MiB``: the predicted pipeline buffers of that rank (receive buffers in transit and the
outputs kept for in-flight micro-batches). Measured in the same last step: ``recv_stock`` /
``recv_jit`` the most bytes of receive buffers (activations and gradients) the rank's stages hold
at once (read from torch's receive descriptors after every receive, forward and backward),
``bwd_done`` how many chunk backwards the rank had finished when its jit peak came (0: none of
its gradients is complete, autoplan's executor setting them to None after each optimizer step);
``pred_grads``: the gradients the cost model counts at that rank's peak moment
(``LayerCost.late_grad_bytes``, :func:`autoplan.plan.schedules.peak_moments`). Then per schedule
how much each rank's peak and receive buffers grow from one m to the next and the range of
predicted/measured. Takes about 4.5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

PP = 4
MIB = 2**20
SCHEDULES = {"gpipe": 1, "1f1b": 1, "interleaved": 2}        # schedule -> vp


def even_stages(units: list[str], chunks: int) -> list[list[str]]:
    """``units`` cut into ``chunks`` contiguous, near-equal stages."""
    bounds = [round(i * len(units) / chunks) for i in range(chunks + 1)]
    return [units[bounds[i]:bounds[i + 1]] for i in range(chunks)]


def layout_dict(schedule: str, m: int, units: list[str]) -> dict:
    vp = SCHEDULES[schedule]
    return dict(pp=PP, vp=vp, mbs=1, num_microbatches=m, schedule=schedule, zero=0, recompute="none",
                stages=even_stages(units, PP * vp))


def step_peak_bytes(events, start_ns: int, end_ns: int) -> tuple[int, int]:
    """The most bytes alive at once between ``start_ns`` and ``end_ns`` and when, from the
    profiler's memory events (+bytes at each allocation, -bytes at each free, counted from the
    profiler's start)."""
    mem = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    live = peak = 0
    when = start_ns
    for t, n in mem:
        if t > end_ns:
            break
        live += n
        if t >= start_ns and live > peak:
            peak, when = live, t
    return peak, when


def watch_receive_buffers(par) -> dict[str, int]:
    """Wrap the pipeline stages of ``par`` so that the returned dict's ``"bytes"`` keeps the most
    bytes of receive buffers (activations and gradients: torch's ``_RecvInfo`` descriptors that hold
    a buffer) alive after any receive, forward or backward, and every backward runs inside a
    profiler range ``stage_backward``."""
    from torch.profiler import record_function

    stages = getattr(par.schedule, "_stages", None) or [par.schedule._stage]
    seen = {"bytes": 0}

    def live() -> int:
        return sum(i.buffer.untyped_storage().nbytes() for st in stages
                   for table in (st.args_recv_info, st.grad_recv_info) for infos in table.values()
                   for i in infos if not i.is_root_arg and i.buffer is not None)

    def watch(fn, name: str | None):
        def call(*args, **kwargs):
            if name is None:
                result = fn(*args, **kwargs)
            else:
                with record_function(name):
                    result = fn(*args, **kwargs)
            seen["bytes"] = max(seen["bytes"], live())
            return result
        return call
    for st in stages:
        for name in ("get_fwd_recv_ops", "get_bwd_recv_ops", "forward_one_chunk", "backward_one_chunk"):
            setattr(st, name, watch(getattr(st, name), "stage_backward" if name == "backward_one_chunk" else None))
    return seen


def worker(rank: int, port: int, shape: dict, runs: list[tuple[dict, bool]], steps: int, out_dir: str) -> None:
    from torch.profiler import ProfilerActivity, profile, record_function

    from autoplan.execute.apply import parallelize
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import ModelShape, build_model
    from autoplan.plan.plan import Layout

    torch.set_num_threads(1)
    err = os.open(Path(out_dir) / f"rank{rank}.err", os.O_WRONLY | os.O_CREAT)
    os.dup2(err, 2)               # the profiler's start/stop lines go there; the parent shows the rest
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=PP)
    s = ModelShape.from_dict(shape)
    peaks = []
    for d, jit in runs:
        layout = Layout.from_dict(d)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            par = parallelize(build_model(s, seed=0), layout, jit_recv_buffers=jit)
            opt = torch.optim.AdamW(par.parameters(), lr=1e-3)
            for step in range(steps):
                tokens, labels = synthetic_batch(step, layout.global_batch, s.seq_len, s.vocab, 0)
                recv = watch_receive_buffers(par) if step == steps - 1 else None
                with record_function("measured_step" if step == steps - 1 else "warmup_step"):
                    par.step(par.batch_slice(tokens), par.batch_slice(labels))
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            del par, opt
        events = prof.profiler.kineto_results.events()
        mark = next(e for e in events if e.name() == "measured_step")
        peak, when = step_peak_bytes(events, mark.start_ns(), mark.end_ns())
        done = sum(1 for e in events if e.name() == "stage_backward" and mark.start_ns() <= e.start_ns()
                   and e.end_ns() <= when)
        peaks.append({"peak_bytes": peak, "recv_bytes": recv["bytes"], "backwards_done": done})
        dist.barrier()
    dist.destroy_process_group()
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(peaks))


def measure(shape: dict, runs: list[tuple[dict, bool]], steps: int) -> list[list[dict]]:
    """Per run and pipeline rank: the measured peak bytes, the most receive-buffer bytes alive and
    how many chunk backwards the rank had finished when it peaked (one 4-process job for all runs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            mp.spawn(worker, args=(port, shape, runs, steps, tmp), nprocs=PP, join=True)
        finally:
            for r in range(PP):
                err = Path(tmp) / f"rank{r}.err"
                lines = [x for x in err.read_text().splitlines() if "profiler_st" not in x] if err.exists() else []
                if lines:
                    print(f"rank {r} stderr:", *lines, sep="\n", file=sys.stderr)
        per_rank = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(PP)]
    return [[per_rank[r][i] for r in range(PP)] for i in range(len(runs))]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt-small", help="a built-in shape")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--model-profile", help="a profile of --model at --seq-len (default: measure one now)")
    ap.add_argument("--cluster", default=str(ROOT / "profiles" / "cpu-4proc.json"))
    ap.add_argument("--micro-batches", default="4,8,16,32")
    ap.add_argument("--schedules", default=",".join(SCHEDULES))
    ap.add_argument("--steps", type=int, default=2, help="steps per run; the last one is measured")
    ap.add_argument("--measurements", help="JSON file of measured peaks: reused when it holds these runs, "
                                           "else written (to re-predict without re-measuring)")
    args = ap.parse_args(argv)

    from autoplan.models.shapes import BUILTIN_SHAPES
    from autoplan.plan.api import estimate_problem, make_problem
    from autoplan.plan.coefficients import costs_for_layout
    from autoplan.plan.figures import memory_by_rank
    from autoplan.plan.plan import Layout
    from autoplan.plan.timeline import per_rank_sums
    from autoplan.profile.layers import profile_model

    shape = replace(BUILTIN_SHAPES[args.model], seq_len=args.seq_len)
    if args.model_profile is None:
        args.model_profile = str(Path(tempfile.mkdtemp()) / "model.json")
        profile_model(args.model, mbs_list=(1,), seq_len=args.seq_len, threads=1).save(args.model_profile)
    units = ["embed"] + [f"block.{i}" for i in range(shape.layers)] + ["head"]
    ms = [int(x) for x in args.micro_batches.split(",")]
    schedules = args.schedules.split(",")
    cases = [(s, m) for s in schedules for m in ms]
    runs = [(layout_dict(s, m, units), jit) for s, m in cases for jit in (False, True)]
    key = json.dumps([shape.to_dict(), runs, args.steps, "peak, receive buffers, backwards done"])
    saved = json.loads(Path(args.measurements).read_text()) if args.measurements and Path(args.measurements).exists() \
        else {}
    if saved.get("key") == key:
        measured = saved["peaks"]
    else:
        measured = measure(shape.to_dict(), runs, args.steps)
        if args.measurements:
            Path(args.measurements).write_text(json.dumps({"key": key, "peaks": measured}))

    print(f"{args.model} at seq_len {args.seq_len}: pp={PP} (interleaved vp=2), mbs 1, fp32, AdamW; peak per rank, MiB "
          f"(measured: torch profiler memory events; predicted: autoplan's cost model)")
    print(f"{'schedule':12} {'m':>3} {'rank':>4} {'stock_MiB':>10} {'jit_MiB':>8} {'predicted_MiB':>14} "
          f"{'pred/jit':>8} {'buffers_MiB':>11} {'recv_stock':>10} {'recv_jit':>8} {'bwd_done':>8} {'pred_grads':>10}")
    table = {}
    for k, (s, m) in enumerate(cases):
        stock, jit = measured[2 * k], measured[2 * k + 1]
        pb = make_problem(args.model_profile, args.cluster, m)
        layout, pred = estimate_problem(pb, Layout.from_dict(layout_dict(s, m, units)))
        costs = costs_for_layout(pb.profile, pb.cluster, layout, pb.train)
        parts = memory_by_rank(pb, layout, costs)
        static, late = per_rank_sums(layout, costs, "static_bytes", "late_grad_bytes")
        for r in range(PP):
            p = pred.memory_per_stage_bytes[r]
            table[s, m, r] = (stock[r]["peak_bytes"], jit[r]["peak_bytes"], p, jit[r]["recv_bytes"])
            grads = parts[r]["params_grads_optimizer"] - (static[r] - late[r])    # made by backward, at the peak
            print(f"{s:12} {m:>3} {r:>4} {stock[r]['peak_bytes'] / MIB:>10.1f} {jit[r]['peak_bytes'] / MIB:>8.1f} "
                  f"{p / MIB:>14.1f} {p / jit[r]['peak_bytes']:>8.3f} {parts[r]['pipeline_buffers'] / MIB:>11.1f} "
                  f"{stock[r]['recv_bytes'] / MIB:>10.1f} {jit[r]['recv_bytes'] / MIB:>8.1f} "
                  f"{jit[r]['backwards_done']:>8} {grads / MIB:>10.1f}")
    print(f"\nper schedule: each rank's peak growth (MiB, ranks 0/1/2/3) from one m to the next, stock and "
          f"jit, the jit receive buffers' growth, and predicted/measured (jit) over all m and over m >= {2 * PP}")
    for s in schedules:
        steps = []
        for a, b in zip(ms, ms[1:]):
            grow = ["/".join(f"{(table[s, b, r][i] - table[s, a, r][i]) / MIB:+.1f}" for r in range(PP)) for i in (0, 1, 3)]
            steps.append(f"m {a}->{b}: stock {grow[0]}, jit {grow[1]} (receive buffers {grow[2]})")
        ratios = {m: [table[s, m, r][2] / table[s, m, r][1] for r in range(PP)] for m in ms}
        every = [x for v in ratios.values() for x in v]
        later = [x for m, v in ratios.items() if m >= 2 * PP for x in v] or every
        print(f"{s:12} " + "; ".join(steps))
        print(f"{'':12} pred/meas {min(every):.3f}..{max(every):.3f}, m >= {2 * PP}: {min(later):.3f}..{max(later):.3f}")

if __name__ == "__main__":
    main()
