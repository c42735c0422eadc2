"""The link measurement engine: which groups to measure, and timing collectives on every rank of a job.

It runs on every rank of an initialised process group (:func:`run_all`); the entry points that
start or join such a job are in :mod:`autoplan.profile.links`.

What is measured, for each op and each group size ``g``::

    all_reduce      dist.all_reduce of an n-byte tensor
    all_gather      dist.all_gather_single (all_gather_into_tensor): n = the GATHERED output bytes,
                    each rank passes in n/g
    reduce_scatter  dist.reduce_scatter_single (reduce_scatter_tensor): n = the input bytes,
                    each rank gets n/g back
    send_recv       ping-pong between two ranks: half the round trip of an n-byte message

So ``n`` is the full tensor of the collective in every case; with that convention the ring model
(``ClusterProfile.link``: all-reduce moves 2(g-1)/g * n per rank, all-gather/reduce-scatter
(g-1)/g * n) scales a fit between group sizes.  Each size is timed ``repeats`` times after
``warmup``, each sample behind a barrier of the group and spanning a few back-to-back calls for
small messages; a rank's figure is the median of its samples and the group's figure the maximum
over its ranks (a collective is done when its slowest rank is).  Times are ``time.perf_counter``
(with a CUDA synchronise on GPUs).  The fit is :func:`autoplan.profile.fit.fit_alpha_beta`.

Group choice (:func:`plan_link_groups`, the same on every rank, so every rank creates the groups in
the same order)::

    intra_node  g in group_sizes, g <= devices per node: the first g ranks of the first node
    inter_node  g in group_sizes, 2 <= g <= world: ranks taken round-robin over the nodes
                (node0[0], node1[0], ..., node0[1], ...), so a group of g <= num_nodes has one
                rank per node; send/recv between node0[0] and node1[0]

Rank 0 (the first rank of the first node) belongs to every group, so it holds every figure.
"""

from __future__ import annotations

import socket
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Sequence

import torch
import torch.distributed as dist

from autoplan.errors import InputError
from autoplan.profile.device_rates import (measure_compute_flops_per_s, measure_compute_flops_per_s_for,
                                           measure_memory_bandwidth_bytes_per_s, sync_device)
from autoplan.profile.fit import fit_alpha_beta
from autoplan.profile.formats import ClusterProfile, DeviceSpec, LinkFit
from autoplan.profile.timing import ProgressEvent, device_name


DEFAULT_SIZES_BYTES: tuple[int, ...] = tuple(4096 * 2 ** i for i in range(12))   # 4 KiB .. 8 MiB


INNER_BYTES = 1 << 20
"""a timed sample of a small message spans max(1, INNER_BYTES // n) calls (at most MAX_INNER)"""


MAX_INNER = 16


@dataclass(frozen=True)
class MeasuredGroup:
    """One group whose links are measured: ``ranks`` (world ranks) over ``link_class``."""

    link_class: str
    ranks: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.ranks)


@dataclass(frozen=True)
class LinkLayout:
    """Every group and pair to measure, the same on every rank."""

    num_nodes: int
    devices_per_node: int
    collective_groups: tuple[MeasuredGroup, ...]
    pairs: tuple[MeasuredGroup, ...]


def default_group_sizes(world: int) -> list[int]:
    """Every power of two from 2 up to ``world``, and ``world`` itself."""
    sizes = [2 ** i for i in range(1, world.bit_length()) if 2 ** i <= world]
    return sorted(set(sizes + ([world] if world >= 2 else [])))


def plan_link_groups(rank_hosts: Sequence[str], group_sizes: Sequence[int] | None = None) -> LinkLayout:
    """The groups to measure for ranks living on ``rank_hosts`` (see the module docstring)."""
    world = len(rank_hosts)
    by_host: dict[str, list[int]] = {}
    for r, h in enumerate(rank_hosts):
        by_host.setdefault(h, []).append(r)
    nodes = list(by_host.values())
    per_node = len(nodes[0])
    if any(len(n) != per_node for n in nodes):
        counts = {h: len(r) for h, r in by_host.items()}
        raise InputError(f"cluster profile needs the same number of ranks on every host, got {counts}")
    sizes = default_group_sizes(world) if group_sizes is None else sorted(set(group_sizes))
    if any(g < 2 or g > world for g in sizes):
        raise InputError(f"group sizes must lie in 2..{world}, got {list(sizes)}")
    groups = [MeasuredGroup("intra_node", tuple(nodes[0][:g])) for g in sizes if g <= per_node]
    pairs = [MeasuredGroup("intra_node", tuple(nodes[0][:2]))] if per_node >= 2 else []
    if len(nodes) > 1:
        round_robin = [node[i] for i in range(per_node) for node in nodes]
        groups += [MeasuredGroup("inter_node", tuple(round_robin[:g])) for g in sizes]
        pairs.append(MeasuredGroup("inter_node", (nodes[0][0], nodes[1][0])))
    return LinkLayout(num_nodes=len(nodes), devices_per_node=per_node,
                      collective_groups=tuple(groups), pairs=tuple(pairs))


@dataclass(frozen=True)
class LinkBenchConfig:
    """What to measure and how often (picklable: it travels to spawned workers)."""

    sizes_bytes: tuple[int, ...] = DEFAULT_SIZES_BYTES
    group_sizes: tuple[int, ...] | None = None
    warmup: int = 2
    repeats: int = 9
    timeout_s: float = 120.0
    matmul_n: int = 1024
    """side of the square matrix product timed for the compute rate"""
    copy_bytes: int = 64 << 20
    """size of the tensor copied for the memory bandwidth"""

    def __post_init__(self) -> None:
        if len(set(self.sizes_bytes)) < 2 or min(self.sizes_bytes) < 4:
            raise InputError(f"need at least two different message sizes of >= 4 bytes, got {self.sizes_bytes}")
        if self.warmup < 0 or self.repeats < 1 or self.timeout_s <= 0:
            raise InputError("warmup must be >= 0, repeats >= 1 and timeout_s > 0")


@dataclass
class RawLinkTimes:
    """Measured times: ``times[link_class][op][group_size] = (sizes_bytes, times_s)``."""

    times: dict[str, dict[str, dict[int, tuple[list[int], list[float]]]]] = field(default_factory=dict)

    def add(self, link_class: str, op: str, g: int, sizes: list[int], times_s: list[float]) -> None:
        self.times.setdefault(link_class, {}).setdefault(op, {})[g] = (sizes, times_s)

    def fits(self) -> dict[str, dict[str, dict[int, LinkFit]]]:
        return {c: {op: {g: fit_alpha_beta(*st) for g, st in by_g.items()} for op, by_g in ops.items()}
                for c, ops in self.times.items()}

    def to_json(self) -> dict:
        return {c: {op: {str(g): {"sizes_bytes": st[0], "times_s": st[1]} for g, st in by_g.items()}
                    for op, by_g in ops.items()} for c, ops in self.times.items()}

    @classmethod
    def from_json(cls, d: dict) -> "RawLinkTimes":
        raw = cls()
        for c, ops in d.items():
            for op, by_g in ops.items():
                for g, st in by_g.items():
                    raw.add(c, op, int(g), list(st["sizes_bytes"]), list(st["times_s"]))
        return raw


def _collective_call(op: str, nbytes: int, g: int, group: dist.ProcessGroup,
                     device: torch.device) -> tuple[Callable[[], None], int]:
    """A zero-argument call running ``op`` once, and the bytes ``n`` it really moves (rounded to
    whole fp32 elements divisible by ``g``)."""
    elems = max(g, (nbytes // 4) // g * g)
    full = torch.zeros(elems, dtype=torch.float32, device=device)       # zeros: sums never grow
    shard = torch.zeros(elems // g, dtype=torch.float32, device=device)
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    calls = {
        "all_reduce": lambda: dist.all_reduce(full, group=group),
        "all_gather": lambda: all_gather(full, shard, group=group),
        "reduce_scatter": lambda: reduce_scatter(shard, full, group=group),
    }
    return calls[op], elems * 4


def _inner_calls(nbytes: int) -> int:
    return max(1, min(MAX_INNER, INNER_BYTES // max(1, nbytes)))


def _interleaved_medians(calls: Sequence[Callable[[], None]], inners: Sequence[int], barrier: Callable[[], None],
                         cfg: LinkBenchConfig, device: torch.device) -> list[float]:
    """Median seconds per call of each of ``calls``.  The sizes are interleaved: each round
    takes one sample of every call (a sample is ``inners[i]`` back-to-back calls behind a
    barrier), so a burst of outside load spoils one sample of many sizes, not many samples of
    one size; the first ``cfg.warmup`` rounds are discarded."""
    samples: list[list[float]] = [[] for _ in calls]
    for rnd in range(cfg.warmup + cfg.repeats):
        for i, (call, inner) in enumerate(zip(calls, inners)):
            barrier()
            sync_device(device)
            t0 = time.perf_counter()
            for _ in range(inner):
                call()
            sync_device(device)
            if rnd >= cfg.warmup:
                samples[i].append((time.perf_counter() - t0) / inner)
    return [statistics.median(x) for x in samples]


def _measure_group(grp: MeasuredGroup, pg: dist.ProcessGroup, op: str, cfg: LinkBenchConfig,
                   device: torch.device) -> tuple[list[int], list[float]]:
    """(sizes, group time per size) of ``op`` on a group this rank belongs to."""
    calls, sizes = zip(*(_collective_call(op, n, grp.size, pg, device) for n in cfg.sizes_bytes))
    medians = _interleaved_medians(calls, [_inner_calls(n) for n in sizes], lambda: dist.barrier(group=pg),
                                   cfg, device)
    slowest = torch.tensor(medians, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=pg)
    return list(sizes), slowest.cpu().tolist()


def _ping_pong_call(buf: torch.Tensor, me: int, a: int, b: int) -> Callable[[], None]:
    def ping_pong() -> None:
        if me == a:
            dist.send(buf, b)
            dist.recv(buf, b)
        else:
            dist.recv(buf, a)
            dist.send(buf, a)
    return ping_pong


def _measure_pair(grp: MeasuredGroup, pg: dist.ProcessGroup, cfg: LinkBenchConfig,
                  device: torch.device) -> tuple[list[int], list[float]]:
    """(sizes, one-way time per size) by ping-pong; meaningful on the first rank of the pair."""
    a, b = grp.ranks
    bufs = [torch.zeros(max(1, n // 4), dtype=torch.float32, device=device) for n in cfg.sizes_bytes]
    sizes = [buf.numel() * 4 for buf in bufs]
    rtts = _interleaved_medians([_ping_pong_call(buf, dist.get_rank(), a, b) for buf in bufs],
                                [_inner_calls(n) for n in sizes], lambda: dist.barrier(group=pg), cfg, device)
    return sizes, [t / 2 for t in rtts]


def measure_links(layout: LinkLayout, cfg: LinkBenchConfig, device: torch.device,
                  report: Callable[[str], None]) -> RawLinkTimes:
    """Run every measurement of ``layout`` on this rank; call on EVERY rank of the job.

    Groups are created in one fixed order on every rank.  The returned times are complete on
    rank 0 (which is in every group); ``report(what)`` is called on rank 0 after each item."""
    me = dist.get_rank()
    pgs = [dist.new_group(list(grp.ranks)) for grp in (*layout.collective_groups, *layout.pairs)]
    raw = RawLinkTimes()
    for grp, pg in zip(layout.collective_groups, pgs):
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            if me in grp.ranks:
                sizes, times_s = _measure_group(grp, pg, op, cfg, device)
                raw.add(grp.link_class, op, grp.size, sizes, times_s)
            report(f"{grp.link_class} {op} g={grp.size}")
    for grp, pg in zip(layout.pairs, pgs[len(layout.collective_groups):]):
        if me in grp.ranks:
            raw.add(grp.link_class, "send_recv", 2, *_measure_pair(grp, pg, cfg, device))
        report(f"{grp.link_class} send_recv")
    dist.barrier()
    return raw


def link_items(layout: LinkLayout) -> int:
    """How many ``report`` calls :func:`measure_links` makes (for a progress total)."""
    return 3 * len(layout.collective_groups) + len(layout.pairs)


@dataclass
class RankZeroResult:
    """What rank 0 brings back from a measurement run."""

    rank_hosts: list[str]
    layout: LinkLayout
    raw: RawLinkTimes
    compute_flops_per_s: float
    memory_bandwidth_bytes_per_s: float
    device_name: str
    concurrent_compute_flops_per_s: float = 0.0


CONCURRENT_COMPUTE_S = 1.0
"""how long every rank multiplies matrices at once to measure the shared compute rate"""


def run_all(cfg: LinkBenchConfig, device: torch.device, progress: Callable[[ProgressEvent], None] | None,
             hostname: str) -> RankZeroResult | None:
    """Every measurement, on every rank of the initialised job; the result on rank 0, else None.
    ``progress`` is called on rank 0 after each item; ``hostname`` groups this rank into a node."""
    hosts: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, hostname)
    rank_hosts = [str(h) for h in hosts]
    layout = plan_link_groups(rank_hosts, cfg.group_sizes)
    total, done = link_items(layout) + 3, [0]

    def report(what: str) -> None:
        done[0] += 1
        if progress is not None and dist.get_rank() == 0:
            progress(ProgressEvent(what=what, done=done[0], total=total))
    raw = measure_links(layout, cfg, device, report)
    flops = bw = 0.0
    if dist.get_rank() == 0:          # alone, while the others wait: no contention for the core
        flops = measure_compute_flops_per_s(cfg.matmul_n, device)
        report("compute rate")
        bw = measure_memory_bandwidth_bytes_per_s(cfg.copy_bytes, device)
        report("memory bandwidth")
    dist.barrier()
    # then all at once, as in training: on an oversubscribed CPU (more processes than cores) or a
    # power-limited node each device computes slower than alone
    mine = torch.tensor([measure_compute_flops_per_s_for(CONCURRENT_COMPUTE_S, cfg.matmul_n, device)],
                        dtype=torch.float64, device=device)          # NCCL takes GPU tensors only
    rates = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(rates, mine)
    report("compute rate, all devices at once")
    concurrent = statistics.median(float(r) for r in rates)
    if dist.get_rank() != 0:
        return None
    return RankZeroResult(rank_hosts, layout, raw, flops, bw, device_name(device), concurrent)


def build_profile(res: RankZeroResult, *, name: str, device_type: str, memory_bytes: int,
                   memory_source: str, cfg: LinkBenchConfig, threads: int) -> ClusterProfile:
    device = DeviceSpec(type=device_type, memory_bytes=memory_bytes, compute_flops_per_s=res.compute_flops_per_s,
                        name=res.device_name, memory_bandwidth_bytes_per_s=res.memory_bandwidth_bytes_per_s,
                        concurrent_compute_flops_per_s=res.concurrent_compute_flops_per_s)
    environment = {
        "torch": torch.__version__, "backend": dist.get_backend() if dist.is_initialized() else "gloo",
        "hostname": socket.gethostname(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threads_per_process": threads, "warmup": cfg.warmup, "repeats": cfg.repeats,
        "statistic": "median per rank, max over the group", "timer": "time.perf_counter",
        "message_size": "n = full tensor of the collective (all_gather: gathered output; "
                        "reduce_scatter: input; send_recv: one message)",
        "measurements": res.raw.to_json(),
    }
    sources = {
        "links": "measured: torch.distributed collectives, alpha-beta fit on relative error",
        "device.compute_flops_per_s": f"measured: {cfg.matmul_n}^3 matmul on rank 0",
        "device.concurrent_compute_flops_per_s": f"measured: {cfg.matmul_n}^3 matmuls for {CONCURRENT_COMPUTE_S} s "
                                                 "on every rank at once, median",
        "device.memory_bandwidth_bytes_per_s": f"measured: copy of {cfg.copy_bytes} bytes on rank 0 (read + write)",
        "device.memory_bytes": memory_source,
    }
    return ClusterProfile(name=name, num_nodes=res.layout.num_nodes, devices_per_node=res.layout.devices_per_node,
                          device=device, links=res.raw.fits(), environment=environment, source="measured",
                          sources=sources, rank_hosts=res.rank_hosts)
