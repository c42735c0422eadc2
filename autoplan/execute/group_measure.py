"""Measure layers as the executor runs them: inside real process groups, every rank at once.

:func:`autoplan.profile.layers.profile_model` times one layer on one process alone, and a TP degree
as one rank's slice of the arithmetic with no communication. In training every device works at
the same time, a TP-sharded block runs through DTensor (per-op dispatch work, two collectives per
sublayer that wait for the slowest rank of the group), and a ZeRO-3 layer all-gathers, copies in
and out and reduce-scatters through FSDP2's hooks. On processes that outnumber cores, on a busy
host or wherever framework work is not small next to the arithmetic, those effects are as large
as the compute (measured on 4 CPU processes, 2 cores: a gpt-small block's forward+backward takes
6.5 ms alone, 15 ms with every process busy and 46 ms inside a TP group of 2). This module measures
them where they happen; the figures go into the model profile (``group_timings``), which the
cost model then prefers to its sum of parts (:mod:`autoplan.plan.cost`)::

    N processes (gloo on CPU, NCCL on GPUs), a mesh ("rest", "g") of groups of g consecutive ranks
    tiling the world (tp innermost, as the executor's mesh); every rank runs the same case at once

    kind x mbs                 g = 1: every rank runs the unit on its own (the shared-device rate)
    block x mbs x t x sp       TP groups of t: the executor's own plan (autoplan.execute.tp.block_plan:
                               ColwiseParallel/RowwiseParallel, SequenceParallel with sp=1); with sp=1
                               the block takes and returns its sequence slice [b, s/t, h], as it does
                               between the blocks of a stage
    block x mbs x d (ZeRO-3)   FSDP groups of d: autoplan.execute.dp.apply_dp(zero=3) (fully_shard,
                               reshard after forward): forward and backward with gradient sync off
                               (two all-gathers per micro-batch) and the backward that reduce-scatters
    block x mbs x c (cp)       context-parallel groups of c = 2 and c = N (where they tile the world
                               and cut the sequence into 2*c chunks): autoplan.execute.cp.apply_cp,
                               the executor's K/V exchange (all-gather on CPU), on this rank's share
                               [b, s/c, h] of the micro-batch, forward and backward (the optimizer
                               figures are the block's own: cp does not wrap its parameters)
    block x mbs x c x t x sp   context parallel with TP, where c x t is the whole world (4 processes:
                               cp 2 x tp 2): the executor's mesh (autoplan.execute.mesh.build_mesh,
                               tp innermost, cp groups strided by t) and its order (apply_cp, then the
                               TP plan); with sp=1 the block takes its TP slice of its cp share,
                               [b, s/(c t), h]
    each case, once            one AdamW and one SGD step over the unit's parameters as wrapped

Each figure is a median over ``repeats`` samples (each sample starts behind a barrier of the whole
job and spans enough forward+backward pairs to last ``min_sample_s``) on every rank, and the
slowest rank's median is kept: a step waits for its slowest rank.

This module is what each process of the job runs (:func:`measure_in_groups`);
:mod:`autoplan.execute.group_profile` starts the job and adds its figures to the model profile::

    torchrun --nproc-per-node 4 -m autoplan.execute.group_profile --model gpt-small --out groups.json
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from autoplan.errors import InputError
from autoplan.execute.pipeline_profile import PIPELINES, balanced_chunks, pipeline_cases, pipeline_step
from autoplan.plan.plan import sequence_split_violation
from autoplan.profile.formats import GroupTiming, PipelineTiming
from autoplan.profile.quiet import FOREIGN_CORES_LIMIT, ForeignLoad

T = TypeVar("T")

WHOLE_MODEL = "(whole model)"
"""key of the whole model's figures among the per-kind timings (every unit composed, one stage)"""

@dataclass(frozen=True)
class GroupProfileConfig:
    """What to measure inside groups."""

    spec: str
    """the model spec (any form :func:`autoplan.models.source.resolve_model` resolves to a buildable model)"""
    mbs_list: tuple[int, ...] = (1, 2, 4)
    tp_list: tuple[int, ...] | None = None
    """TP group sizes (those that divide the world, the heads and the TP layers are measured);
    None: every divisor of the world above 1"""
    dp_list: tuple[int, ...] | None = None
    """FSDP (ZeRO-3) group sizes (those that divide the world are measured); None: every divisor above 1"""
    seq_len: int | None = None
    precision: str = "fp32"
    warmup: int = 2
    repeats: int = 7
    min_sample_s: float = 0.1
    """a sample repeats forward+backward until it lasts this long (at most ``max_inner`` times)"""
    max_inner: int = 32
    max_attempts: int = 4
    """a case is measured again (up to this many times) while other programs load the CPU
    (:data:`autoplan.profile.quiet.FOREIGN_CORES_LIMIT`)"""
    seed: int = 0
    pipelines: bool = True
    """also run short real pipelines of the model (:mod:`autoplan.execute.pipeline_profile`)"""
    chunk_splits: tuple[tuple[int, ...], ...] = ()
    """the pipeline runs' units per chunk, one split per chunk count (``pp * vp``): the first job's
    (:func:`pipeline_splits`), which ``group_profile.measure_jobs`` hands to the later jobs so that every job
    times the same pipelines; a chunk count not among them is balanced by this job's own in-group
    times (:func:`~autoplan.execute.pipeline_profile.balanced_chunks`)"""


@dataclass
class _Case:
    """A unit as wrapped for one measurement, with inputs and a closure for one forward+backward."""

    label: str
    kind: str
    module: object
    forward: Callable[[], object]
    """runs the forward, returns what ``backward`` takes"""
    backward: Callable[[object], None]
    fsdp: bool = False
    foreign_cores: float = 0.0
    """the load other programs put on the CPU during the last measurement of this case"""


def _median_max(values: list[float]) -> float:
    """This rank's median, then the maximum over every rank of the job."""
    import torch
    import torch.distributed as dist
    t = torch.tensor([statistics.median(values)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _agree_max(x: float) -> float:
    import torch
    import torch.distributed as dist
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def _foreign_cores(load: ForeignLoad, cpu0: float, device) -> float:
    """Cores other programs used since ``load.start()`` (every rank gets the largest figure); 0 on GPUs,
    where the host's load does not slow the device."""
    import torch
    import torch.distributed as dist
    if device.type != "cpu":
        return 0.0
    own = torch.tensor([time.process_time() - cpu0], dtype=torch.float64)
    dist.all_reduce(own)                              # the job's CPU seconds, every rank together
    return _agree_max(load.stop(float(own)))


def _sync(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _pairs(case: _Case, device, n: int) -> tuple[float, float]:
    """Run ``n`` forward+backward pairs back to back: (forward seconds, backward seconds) per pair."""
    f = b = 0.0
    for _ in range(n):
        _sync(device)
        t0 = time.perf_counter()
        root = case.forward()
        _sync(device)
        t1 = time.perf_counter()
        case.backward(root)
        _sync(device)
        f += t1 - t0
        b += time.perf_counter() - t1
        del root
    return f / n, b / n


def time_pairs(case: _Case, cfg: GroupProfileConfig, device) -> tuple[float, float]:
    """(forward seconds, backward seconds) per micro-batch: every rank of the job runs ``case`` at
    once; the slowest rank's median over ``cfg.repeats`` samples, each behind a barrier of the job."""
    return time_pairs_in_turn([case], cfg, device)[0]


def time_pairs_in_turn(cases: list[_Case], cfg: GroupProfileConfig, device) -> list[tuple[float, float]]:
    """:func:`time_pairs` of each of ``cases``, their samples taken in turn (one of each case per
    round): on a machine whose speed drifts over minutes (a 2-core VM: the same whole model 25%
    apart in two profiles of one hour) the cases' ratios, which choose the micro-batch size, stay
    what the machine shows at one moment."""
    import torch.distributed as dist
    inners = []
    for case in cases:
        warm = []
        for _ in range(max(1, cfg.warmup)):
            dist.barrier()
            warm.append(sum(_pairs(case, device, 1)))
        inner = max(1, min(cfg.max_inner, math.ceil(cfg.min_sample_s / max(min(warm), 1e-9))))
        inners.append(int(_agree_max(inner)))       # every rank runs the same calls (collectives)

    def sample(k: int) -> tuple[float, float]:
        dist.barrier()
        return _pairs(cases[k], device, inners[k])
    samples, foreign = _in_turn(len(cases), sample, cfg, device)
    for case in cases:
        case.foreign_cores = foreign
    return [(_median_max([f for f, _ in got]), _median_max([b for _, b in got])) for got in samples]


def _in_turn(n: int, sample: Callable[[int], T], cfg: GroupProfileConfig, device, *, rotate: bool = False,
             progress: Callable[[int], None] | None = None) -> tuple[list[list[T]], float]:
    """(each of ``n`` items' samples, the foreign load seen): ``cfg.repeats`` rounds of ``sample(k)`` for
    every item ``k``, one of each per round (``rotate``: the order rotated each round,
    :func:`~autoplan.execute.measure.turn_order`), the whole again while other programs load the CPU
    (up to ``cfg.max_attempts`` times). ``progress(r)`` after round ``r`` (1-based)."""
    from autoplan.execute.measure import turn_order
    for _ in range(cfg.max_attempts):
        load = ForeignLoad().start()
        cpu0 = time.process_time()
        got: list[list[T]] = [[] for _ in range(n)]
        for r in range(cfg.repeats):
            for k in turn_order(n, r) if rotate else range(n):
                got[k].append(sample(k))
            if progress is not None:
                progress(r + 1)
        foreign = _foreign_cores(load, cpu0, device)
        if foreign <= FOREIGN_CORES_LIMIT:
            break
    return got, foreign


def time_optimizer(params: list, make, cfg: GroupProfileConfig, device) -> float:
    """Seconds of one ``step()`` of the optimizer ``make(params)`` (gradients set to ones), every rank
    at once; the slowest rank's median."""
    import torch
    import torch.distributed as dist
    for p in params:
        p.grad = torch.ones_like(p)
    opt = make(params)
    for _ in range(max(1, cfg.warmup)):
        opt.step()
    samples = []
    for _ in range(cfg.repeats):
        dist.barrier()
        _sync(device)
        t0 = time.perf_counter()
        opt.step()
        _sync(device)
        samples.append(time.perf_counter() - t0)
    for p in params:
        p.grad = None
    return _median_max(samples)


class _Job:
    """The model's units and this job's meshes (one 2-D mesh per group size)."""

    def __init__(self, cfg: GroupProfileConfig, device):
        import torch
        import torch.distributed as dist

        from autoplan.models.registry import (model_seq_len, model_tp_plan, model_vocab, sample_tokens, unit_inputs,
                                              unit_kinds)
        from autoplan.models.source import resolve_model
        from autoplan.models.transformer import REFERENCE_TP_PLAN
        self.cfg, self.device = cfg, device
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        model = resolve_model(cfg.spec).build(cfg.seed).eval()     # eval: no dropout while measuring
        self.model = model
        self.vocab = model_vocab(model)
        max_s = model_seq_len(model)
        self.seq_len = max_s if cfg.seq_len is None else cfg.seq_len
        if not 1 <= self.seq_len <= max_s:
            raise InputError(f"seq_len must be in 1..{max_s} (the model's), got {self.seq_len}")
        self.kinds = unit_kinds(model)
        self.tp_plan = model_tp_plan(model) or REFERENCE_TP_PLAN
        units = [k.units[0] for k in self.kinds]
        self.inputs = {b: unit_inputs(model, units, sample_tokens(self.vocab, b, self.seq_len, cfg.seed))
                       for b in cfg.mbs_list}
        self._meshes: dict[int | tuple[int, int], object] = {}
        self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]

    def group_mesh(self, g: int):
        """The 1-D mesh of this rank's group of ``g`` consecutive ranks."""
        from torch.distributed.device_mesh import init_device_mesh
        if g not in self._meshes:
            self._meshes[g] = init_device_mesh(self.device.type, (self.world // g, g), mesh_dim_names=("rest", "g"))
        return self._meshes[g]["g"]

    def cp_tp_meshes(self, cp: int, tp: int) -> tuple[object, object]:
        """(cp mesh, tp mesh) of this rank as the executor builds them for ``cp x tp`` (the rest of the
        world data parallel): :func:`autoplan.execute.mesh.build_mesh`, tp innermost."""
        from autoplan.execute.mesh import build_mesh
        if (cp, tp) not in self._meshes:
            self._meshes[(cp, tp)] = build_mesh(self.device.type, pp=1, dp=self.world // (cp * tp), tp=tp, cp=cp)
        mesh = self._meshes[(cp, tp)]
        return mesh.get("cp"), mesh.get("tp")


def _unit_copy(job: _Job, kind) -> object:
    import copy

    from autoplan.models.units import unit_module
    return copy.deepcopy(unit_module(job.model, kind.units[0])).to(job.device)


def _make_case(job: _Job, kind, mbs: int, *, tp: int = 1, sp: int = 0, dp: int = 1, cp: int = 1) -> _Case:
    """The unit of ``kind`` wrapped as the executor wraps it for (tp, sp, dp, cp), with this rank's inputs."""
    import torch
    import torch.nn.functional as F

    from autoplan.execute.dp import apply_dp
    from autoplan.execute.tp import block_plan
    module = _unit_copy(job, kind)
    x = job.inputs[mbs][kind.units[0]].to(job.device)
    low = job.dtype if job.cfg.precision != "fp32" else None
    autocast = low is not None and dp == 1
    if cp > 1 and tp > 1:
        cp_mesh, tp_mesh = job.cp_tp_meshes(cp, tp)
    else:
        cp_mesh, tp_mesh = (job.group_mesh(cp) if cp > 1 else None), (job.group_mesh(tp) if tp > 1 else None)
    if cp > 1:     # as the executor: context parallel first, then TP
        # this rank's load-balanced share of each sequence; attention exchanges K/V over the group
        from autoplan.execute.cp import apply_cp, torch_ring_available
        shard = apply_cp(module, cp_mesh, use_torch_ring=torch_ring_available(job.device.type))
        x = shard.take(x, dim=1).contiguous()
    if tp > 1:
        from torch.distributed.tensor.parallel import parallelize_module
        plan = block_plan(job.tp_plan.colwise, job.tp_plan.rowwise, sequence_parallel=bool(sp),
                          sp_norms=job.tp_plan.sp_norms, sp_gather=job.tp_plan.sp_gather)
        parallelize_module(module, tp_mesh, plan)
        if sp:     # between the blocks of a stage each TP rank holds its slice of the (cp rank's) sequence
            x = x.chunk(tp, dim=1)[tp_mesh.get_local_rank()].contiguous()
    if dp > 1:
        import torch.nn as nn
        apply_dp(module, nn.ModuleDict(), job.group_mesh(dp), zero=3, tp=1, pipelined=True, param_dtype=low)
        module.set_requires_gradient_sync(False)
    if x.is_floating_point():
        x = x.detach().to(job.dtype if low is not None and not autocast and dp == 1 else x.dtype).requires_grad_(True)
    g = torch.Generator(device="cpu").manual_seed(job.cfg.seed + job.rank)
    if kind.computes_loss:
        targets = torch.randint(job.vocab, tuple(x.shape[:2]), generator=g).to(job.device)

        def forward() -> torch.Tensor:
            with torch.autocast(job.device.type, dtype=low, enabled=autocast):
                logits = module(x)
                return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

        def backward(loss) -> None:
            loss.backward()
    else:
        with torch.no_grad(), torch.autocast(job.device.type, dtype=low, enabled=autocast):
            shape_out = module(x)
        upstream = torch.randn(tuple(shape_out.shape), generator=g).to(job.device, shape_out.dtype)
        del shape_out

        def forward() -> torch.Tensor:
            with torch.autocast(job.device.type, dtype=low, enabled=autocast):
                return module(x)

        def backward(out) -> None:
            out.backward(upstream)
    label = f"{kind.name} mbs={mbs}" + (f" tp={tp}" + (" sp" if sp else "") if tp > 1 else "") \
        + (f" zero3 dp={dp}" if dp > 1 else "") + (f" cp={cp}" if cp > 1 else "")
    return _Case(label, kind.name, module, forward, backward, fsdp=dp > 1)


def _cp_sizes(job: _Job, kind) -> list[int]:
    """Context-parallel group sizes measured for ``kind``: 2 and the whole world, those that tile the
    world and cut the sequence into 2*cp chunks; none for a unit without an attention core or one
    that takes tokens or computes the loss (the embedding and the head)."""
    from autoplan.execute.cp import has_attention_core
    from autoplan.models.units import unit_module
    if kind.takes_tokens or kind.computes_loss or not has_attention_core(unit_module(job.model, kind.units[0])):
        return []
    w = job.world
    return [c for c in sorted({2, w}) if c > 1 and w % c == 0 and job.seq_len % (2 * c) == 0]


def _points(job: _Job) -> list[tuple[object, int, int, int, int, int]]:
    """(kind, mbs, tp, sp, dp, cp) of every case, the same on every rank."""
    from autoplan.models.registry import tp_divisors_ok
    w, cfg = job.world, job.cfg
    out = []
    for kind in job.kinds:
        cps = _cp_sizes(job, kind)
        for mbs in cfg.mbs_list:
            out.append((kind, mbs, 1, 0, 1, 1))
            if not kind.tp_shardable:
                continue
            for t in sorted(set(cfg.tp_list or range(2, w + 1))):
                if t > 1 and w % t == 0 and tp_divisors_ok(job.model, kind, t):
                    seq_ok = not sequence_split_violation(job.seq_len, tp=t, sp=1)
                    out += [(kind, mbs, t, sp, 1, 1) for sp in ((0, 1) if seq_ok else (0,))]
            for d in sorted(set(cfg.dp_list or range(2, w + 1))):
                if d > 1 and w % d == 0:
                    out.append((kind, mbs, 1, 0, d, 1))
            out += [(kind, mbs, 1, 0, 1, c) for c in cps]
            out += [(kind, mbs, t, sp, 1, c) for c, t, sp in _cp_tp_cases(job, kind, cps)]
    return out


def _cp_tp_cases(job: _Job, kind, cps: list[int]) -> list[tuple[int, int, int]]:
    """(cp, tp, sp) of the context-parallel cases with TP measured for ``kind``: cp x tp the whole
    world (the layouts with neither dp nor pp beside them), tp > 1 a degree the TP cases measure,
    sp 0 and 1 (1 where each cp rank's share of the sequence splits over tp)."""
    from autoplan.models.registry import tp_divisors_ok
    w, out = job.world, []
    for c in cps:
        t = w // c
        if t > 1 and t in set(job.cfg.tp_list or range(2, w + 1)) and tp_divisors_ok(job.model, kind, t):
            seq_ok = not sequence_split_violation(job.seq_len, cp=c, tp=t, sp=1)
            out += [(c, t, sp) for sp in ((0, 1) if seq_ok else (0,))]
    return out


def measure_in_groups(cfg: GroupProfileConfig, device, progress: Callable[[int, int, str], None] | None = None
                      ) -> tuple[dict[str, list], float]:
    """The whole model (first: :func:`_measure_whole_model`), every case of :func:`_points` on every
    rank of the initialised job, then (``cfg.pipelines``) short pipelines: (timings per kind,
    :data:`WHOLE_MODEL` and :data:`~autoplan.execute.pipeline_profile.PIPELINES` among them; the
    largest foreign CPU load seen in the kept measurements); the same result on every rank."""
    import torch

    job = _Job(cfg, device)
    points = _points(job)
    n_pipes = len(pipeline_cases(job.world, len(job.model.unit_names()))) if cfg.pipelines else 0
    total = len(points) + len(cfg.mbs_list) + n_pipes
    out: dict[str, list] = {}
    worst_foreign = 0.0
    # the whole model first, before any other case has run in this job: its figures set what a step
    # costs at each micro-batch size (the composition factors), and later in the job, after the
    # TP, FSDP and cp cases, the same measurement strays (see _measure_whole_model)
    out[WHOLE_MODEL], worst_foreign = _measure_whole_model(job, cfg, device)
    for k, mbs in enumerate(cfg.mbs_list, start=1):
        if progress is not None:
            progress(k, total, f"whole model mbs={mbs}")
    optimizer_done: dict[tuple, tuple[float, float]] = {}
    for i, (kind, mbs, tp, sp, dp, cp) in enumerate(points, start=len(cfg.mbs_list) + 1):
        case = _make_case(job, kind, mbs, tp=tp, sp=sp, dp=dp, cp=cp)
        fwd, bwd = time_pairs(case, cfg, device)
        bwd_sync = 0.0
        if case.fsdp:
            case.module.set_requires_gradient_sync(True)
            _, bwd_sync = time_pairs(case, cfg, device)
        worst_foreign = max(worst_foreign, case.foreign_cores)
        key = (kind.name, tp, sp, dp)
        if key not in optimizer_done:    # the optimizer does not depend on the micro-batch size (nor on cp)
            params = [p for p in case.module.parameters() if p.requires_grad]
            adamw = time_optimizer(params, lambda ps: torch.optim.AdamW(ps, lr=1e-4), cfg, device)
            sgd = time_optimizer(params, lambda ps: torch.optim.SGD(ps, lr=1e-4), cfg, device)
            optimizer_done[key] = (adamw, sgd)
        adamw, sgd = optimizer_done[key]
        out.setdefault(kind.name, []).append(GroupTiming(
            world=job.world, mbs=mbs, tp=tp, sp=sp, dp=dp, cp=cp, forward_s=fwd, backward_s=bwd,
            backward_sync_s=bwd_sync, optimizer_s=adamw, optimizer_sgd_s=sgd))
        label = case.label
        del case
        if progress is not None:
            progress(i, total, label)
    if n_pipes:
        done = len(cfg.mbs_list) + len(points)

        def said(what: str) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, what)
        out[PIPELINES], foreign = measure_pipelines(job, cfg, device, said, _job_unit_times(job, out, min(cfg.mbs_list)))
        worst_foreign = max(worst_foreign, foreign)
    return out, worst_foreign


def _job_unit_times(job: _Job, out: dict[str, list], mbs: int) -> list[float] | None:
    """Each unit's in-group forward+backward at ``mbs`` (no parallelism), in model order, from the cases
    measured in this job (None where a kind lacks that figure)."""
    kind_of = {u: k.name for k in job.kinds for u in k.units}
    times = {}
    for name, timings in out.items():
        for g in timings:
            if isinstance(g, GroupTiming) and (g.mbs, g.tp, g.sp, g.dp, g.cp) == (mbs, 1, 0, 1, 1):
                times[name] = g.forward_s + g.backward_s
    units = [kind_of.get(u) for u in job.model.unit_names()]
    return None if any(k not in times for k in units) else [times[k] for k in units]


def _measure_whole_model(job: _Job, cfg: GroupProfileConfig, device) -> tuple[list[GroupTiming], float]:
    """The whole model on every rank at each of ``cfg.mbs_list``, the sizes timed in turn (one module),
    in turn with the same under DDP over every process (``backward_sync_s``: its forward and backward
    less the plain forward), and its optimizer steps: (one timing per size, the foreign load seen).

    Layers composed into one model run slower than each alone (a working set larger than the caches,
    fresh activation memory every step), and the sizes' ratios are what picks a micro-batch size, so
    this is measured first in the job, in the state a training job starts in. Measured on 4 CPU
    processes, 2 cores (seed 20261216's workload 1, 2026-12-04, ``docs/fidelity.md``): measured first,
    the mbs 4 / mbs 2 per-sample ratio came out 0.958-0.980 in six jobs (fresh jobs timing only the
    whole model: 0.968-0.980); measured after the other cases, 0.904-1.055 in seven."""
    import copy

    import torch
    import torch.nn as nn

    from autoplan.execute.dp import apply_dp
    first = _whole_model_case(job, cfg.mbs_list[0])
    module = first.module
    cases = [first] + [_whole_model_case(job, mbs, module) for mbs in cfg.mbs_list[1:]]
    # the same model as the executor runs it data parallel over every process (DDP: gradients
    # all-reduced during the backward), timed in turn with the plain one
    ddp = apply_dp(copy.deepcopy(job.model).to(job.device), nn.ModuleDict(), job.group_mesh(job.world), zero=0,
                   tp=1, pipelined=False).runner
    cases += [_whole_model_case(job, mbs, ddp) for mbs in cfg.mbs_list]
    timed = time_pairs_in_turn(cases, cfg, device)
    n = len(cfg.mbs_list)
    foreign = max(c.foreign_cores for c in cases)
    params = list(module.parameters())
    adamw = time_optimizer(params, lambda ps: torch.optim.AdamW(ps, lr=1e-4), cfg, device)
    sgd = time_optimizer(params, lambda ps: torch.optim.SGD(ps, lr=1e-4), cfg, device)
    return [GroupTiming(world=job.world, mbs=mbs, forward_s=fwd, backward_s=bwd,
                        backward_sync_s=max(bwd, ddp_fwd + ddp_bwd - fwd), optimizer_s=adamw, optimizer_sgd_s=sgd)
            for mbs, (fwd, bwd), (ddp_fwd, ddp_bwd) in zip(cfg.mbs_list, timed[:n], timed[n:])], foreign


def _whole_model_case(job: _Job, mbs: int, module=None) -> _Case:
    """The whole model (every unit, no parallelism) with its loss, on this rank's tokens (``module``:
    a copy made for another micro-batch size, else a new one)."""
    import copy

    import torch
    import torch.nn.functional as F

    from autoplan.models.registry import sample_tokens
    if module is None:
        module = copy.deepcopy(job.model).to(job.device)
    tokens = sample_tokens(job.vocab, mbs, job.seq_len, job.cfg.seed + job.rank).to(job.device)
    targets = sample_tokens(job.vocab, mbs, job.seq_len, job.cfg.seed + 1000 + job.rank).to(job.device)
    low = job.dtype if job.cfg.precision != "fp32" else None

    def forward() -> torch.Tensor:
        with torch.autocast(job.device.type, dtype=low, enabled=low is not None):
            return F.cross_entropy(module(tokens).flatten(0, 1).float(), targets.flatten())
    return _Case(f"whole model mbs={mbs}", WHOLE_MODEL, module, forward, lambda loss: loss.backward())


def _timed(fn: Callable[[], None], device) -> float:
    """Seconds of ``fn()``, started behind a barrier of the job."""
    import torch.distributed as dist
    dist.barrier()
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def _step_samples_in_turn(steps: list[Callable[[], None]], reference: Callable[[], None], cfg: GroupProfileConfig,
                          device, rank: int, progress: Callable[[int], None] | None = None
                          ) -> tuple[list[tuple[list[float], list[float], list[float]]], float]:
    """(per step closure: this rank's step times, its reference times, rank 0's reference times while
    the other ranks wait; the foreign load seen): ``cfg.repeats`` rounds, each one step of every closure
    in turn (the order rotated each round, :func:`~autoplan.execute.measure.turn_order`), each step after
    the two references; measured again while other programs load the CPU. ``progress(r)`` after round
    ``r`` (1-based).

    In turn, not one closure's repeats after another's: the fit compares the runs with each other (few
    micro-batches against many, 1F1B against interleaved), and the machine's speed drifts over the
    minute they take. Timed one after another (until 2026-12-05), three profiles of one workload in a
    row on a quiet machine (fidelity seed 20261237 workload 0, 3 processes) measured its 1F1B run of 12
    micro-batches at 0.958, 1.153 and 1.016 s, the per-chunk cost fitted to them came out 3.6, 15.7 and
    3.1 ms, and the ten layouts' predictions moved against each other by 4.3% in the median, 9.0% at
    most (``docs/probes/20261205c``)."""
    def lone() -> None:
        if rank == 0:
            reference()

    def sample(k: int) -> tuple[float, float, float]:      # (reference, rank 0 alone, the step), in this order
        return _timed(reference, device), _timed(lone, device), _timed(steps[k], device)
    for _ in range(max(1, cfg.warmup)):
        for step in steps:
            _timed(reference, device)
            _timed(step, device)
    samples, foreign = _in_turn(len(steps), sample, cfg, device, rotate=True, progress=progress)
    return [([t for _, _, t in got], [r for r, _, _ in got], [o for _, o, _ in got]) for got in samples], foreign


PIPELINES_TOGETHER_SHARE = 0.5
"""the pipeline runs are built side by side (and timed in turn) where their parameters and gradients take
at most this share of the device's free memory; else one at a time (a large model on a GPU)"""


def _pipelines_fit_together(job: _Job, cases: list[tuple[int, int, str, int]], device) -> bool:
    """Whether every run of ``cases`` fits on this rank at once: each holds a copy of 1/pp of the
    model (its chunks), with gradients (:data:`PIPELINES_TOGETHER_SHARE` of the free memory; host
    memory is not bounded here, as validate's in-turn jobs on CPU)."""
    if device.type != "cuda":
        return True
    import torch
    free_bytes, _ = torch.cuda.mem_get_info(device)
    param_bytes = sum(p.numel() * p.element_size() for p in job.model.parameters())
    return 2 * param_bytes * sum(1 / pp for pp, _, _, _ in cases) <= PIPELINES_TOGETHER_SHARE * free_bytes


def pipeline_splits(timings: dict[str, list]) -> tuple[tuple[int, ...], ...]:
    """The chunk splits of the pipeline runs in a job's ``timings``, one per chunk count (for
    :attr:`GroupProfileConfig.chunk_splits`)."""
    found: dict[int, tuple[int, ...]] = {}
    for t in timings.get(PIPELINES, []):
        found.setdefault(len(t.chunks), tuple(t.chunks))
    return tuple(found[n] for n in sorted(found))


def _split(cfg: GroupProfileConfig, unit_s: list[float] | None, chunks: int) -> tuple[int, ...] | None:
    """Units per chunk of a pipeline run of ``chunks`` chunks: the split ``cfg`` names for that count,
    else balanced by ``unit_s`` (None without them: even chunks)."""
    given = next((tuple(s) for s in cfg.chunk_splits if len(s) == chunks), None)
    if given is not None:
        return given
    return balanced_chunks(unit_s, chunks) if unit_s else None


def measure_pipelines(job: _Job, cfg: GroupProfileConfig, device, progress: Callable[[str], None] | None = None,
                      unit_s: list[float] | None = None) -> tuple[list[PipelineTiming], float]:
    """Every run of :func:`~autoplan.execute.pipeline_profile.pipeline_cases` in the initialised job:
    (the runs, the largest foreign CPU load seen); the same result on every rank. Before each step
    every rank runs the whole model's forward and backward once (``reference_s``), then rank 0 alone
    while the others wait in a barrier (``lone_reference_s``). The chunks are balanced by the units'
    in-group times ``unit_s`` (:func:`~autoplan.execute.pipeline_profile.balanced_chunks`, the split a
    planner picks; None: even chunks), unless ``cfg.chunk_splits`` names the split (a later job of a
    profile takes the first job's: :func:`pipeline_splits`). The runs are timed in turn, one step of each per round
    (:func:`_step_samples_in_turn`, which says why), where they fit side by side
    (:func:`_pipelines_fit_together`), else one after another."""
    mbs = min(cfg.mbs_list)
    whole = _whole_model_case(job, mbs)

    def reference() -> None:
        whole.backward(whole.forward())
        whole.module.zero_grad(set_to_none=True)
    cases = pipeline_cases(job.world, len(job.model.unit_names()))
    together = _pipelines_fit_together(job, cases, device)
    groups = [cases] if together else [[case] for case in cases]
    out: list[PipelineTiming] = []
    worst = 0.0
    for group in groups:
        built = [pipeline_step(job, pp, vp, schedule, m, mbs, device, _split(cfg, unit_s, pp * vp))
                 for pp, vp, schedule, m in group]
        reported = 0

        def round_done(r: int) -> None:     # the group's share of the progress (one per run), over its rounds
            nonlocal reported
            while progress is not None and reported < len(group) * r // cfg.repeats:
                reported += 1
                progress(f"pipelines in turn, round {r}/{cfg.repeats}" if together else
                         "pipeline pp={} vp={} {} m={}".format(*group[0]))
        samples, foreign = _step_samples_in_turn([step for _, step in built], reference, cfg, device, job.rank,
                                                 round_done)
        worst = max(worst, foreign)
        out += [PipelineTiming(world=job.world, pp=pp, vp=vp, schedule=schedule, num_microbatches=m, mbs=mbs,
                               chunks=sizes, step_s=_median_max(steps), reference_s=_median_max(refs),
                               lone_reference_s=_median_max(lones))
                for (pp, vp, schedule, m), (sizes, _), (steps, refs, lones) in zip(group, built, samples)]
        del built
    return out, worst
