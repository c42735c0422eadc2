"""Measure a cluster: collectives per group size (alpha-beta fits), device compute and memory rates.

Three entry points; the first two share one measurement engine (:func:`measure_links`):

- :func:`profile_cluster` spawns ``nproc`` local processes (gloo on 127.0.0.1, one intra-op thread
  each) and measures them as one node;
- :func:`profile_cluster_distributed` runs inside an already initialised job (``torchrun``, one or
  many nodes, gloo or NCCL), groups the ranks by hostname, and measures the links inside a node
  (``intra_node``) and, when there are several hosts, between nodes (``inter_node``);
- :func:`profile_one_device` measures one device in this process (``--nproc 1``: a CPU process, or
  one GPU): its matmul rate, copy bandwidth and memory, and no links: a one-device cluster, on
  which the planner still chooses the micro-batch size and recomputation.

What is measured, for each op in ``COLLECTIVE_OPS`` and each group size ``g``::

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
(with a CUDA synchronise on GPUs).  The fit (:func:`fit_alpha_beta`) is a pure function.

Group choice (the same on every rank, so every rank creates the groups in the same order)::

    intra_node  g in group_sizes, g <= devices per node: the first g ranks of the first node
    inter_node  g in group_sizes, 2 <= g <= world: ranks taken round-robin over the nodes
                (node0[0], node1[0], ..., node0[1], ...), so a group of g <= num_nodes has one
                rank per node; send/recv between node0[0] and node1[0]

Rank 0 (the first rank of the first node) belongs to every group, so it holds every figure.

A hung collective cannot hang the caller: the process group has ``timeout_s``, and the parent
of spawned workers kills them when no progress arrives for ``timeout_s`` (plus a start-up
allowance) and raises :class:`AutoplanError`.

Device memory: the given budget, or on CPU ``CPU_MEMORY_FRACTION`` of physical RAM divided by the
number of processes; on CUDA the device's total memory.

Run::

    python -c "from autoplan.profile.links import profile_cluster; print(profile_cluster(2, memory_per_device_bytes=None).to_dict())"
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from autoplan.errors import AutoplanError, InputError
from autoplan.jsonio import write_json_atomic
from autoplan.processes import children_ignore
from autoplan.profile.fit import MAX_BANDWIDTH_BYTES_PER_S, fit_alpha_beta  # noqa: F401  (re-exported)
from autoplan.profile.formats import ClusterProfile, DeviceSpec, LinkFit
from autoplan.profile.layers import ProgressCallback, ProgressEvent, device_name

DEFAULT_SIZES_BYTES: tuple[int, ...] = tuple(4096 * 2 ** i for i in range(12))   # 4 KiB .. 8 MiB
CPU_MEMORY_FRACTION = 0.75
"""default per-process budget on CPU: this share of physical RAM, split evenly over the
processes; the rest is left to the OS, the Python interpreters and torch's own allocations"""
STARTUP_ALLOWANCE_S = 120.0
"""time spawned workers get to import torch and join the process group before the watchdog runs"""
INNER_BYTES = 1 << 20
"""a timed sample of a small message spans max(1, INNER_BYTES // n) calls (at most MAX_INNER)"""
MAX_INNER = 16

_UNITS = {"": 1, "b": 1,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
          "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")


def parse_bytes(text: str) -> int:
    """``"512MiB"`` -> 536870912.  Plain integers are bytes; units KB/MB/GB/TB are powers of 1000,
    KiB/MiB/GiB/TiB powers of 1024 (case-insensitive); InputError on anything else."""
    m = _BYTES_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise InputError(f"cannot read {text!r} as a byte count (examples: 4096, 512MiB, 80GB, 1.5GiB)")
    value = float(m.group(1)) * _UNITS[unit]
    if not value < 2 ** 62:          # also catches inf from a number with hundreds of digits
        raise InputError(f"byte count {text[:40]!r} is too large")
    return int(round(value))


# --------------------------------------------------------------------------------------------
# which groups to measure (pure)
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# the measurement engine (runs on every rank of an initialised process group)
# --------------------------------------------------------------------------------------------

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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(inner):
                call()
            _sync(device)
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


def measure_compute_flops_per_s(n: int, device: torch.device, repeats: int = 5) -> float:
    """Dense matmul rate: 2*n^3 FLOPs over the median time of an n x n x n product
    (fp32 on CPU, bf16 on CUDA)."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    samples = []
    for i in range(repeats + 1):
        _sync(device)
        t0 = time.perf_counter()
        torch.mm(a, b)
        _sync(device)
        if i:
            samples.append(time.perf_counter() - t0)
    return 2.0 * n ** 3 / statistics.median(samples)


def measure_compute_flops_per_s_for(duration_s: float, n: int, device: torch.device) -> float:
    """Dense matmul rate over a fixed wall-clock window: products run back to back for
    ``duration_s`` and the FLOPs done are divided by the time taken. Started on every rank at once
    (after a barrier), every rank's window overlaps the others', so the rate is what a device gets
    while all devices compute."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    torch.mm(a, b)
    _sync(device)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < duration_s:
        torch.mm(a, b)
        _sync(device)
        done += 1
    return 2.0 * n ** 3 * done / (time.perf_counter() - t0)


def measure_memory_bandwidth_bytes_per_s(nbytes: int, device: torch.device, repeats: int = 5) -> float:
    """Copy bandwidth: bytes read plus bytes written (2 * nbytes) over the median time of one
    tensor copy."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    samples = []
    for i in range(repeats + 1):
        _sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        if i:
            samples.append(time.perf_counter() - t0)
    return 2.0 * src.numel() * 4 / statistics.median(samples)


@dataclass
class _RankZeroResult:
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


def _run_all(cfg: LinkBenchConfig, device: torch.device, progress: Callable[[ProgressEvent], None] | None,
             hostname: str) -> _RankZeroResult | None:
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
    return _RankZeroResult(rank_hosts, layout, raw, flops, bw, device_name(device), concurrent)


def _build_profile(res: _RankZeroResult, *, name: str, device_type: str, memory_bytes: int,
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


# --------------------------------------------------------------------------------------------
# local processes
# --------------------------------------------------------------------------------------------

def max_local_processes() -> int:
    """The most local processes ``profile_cluster`` starts: 4 per CPU core (at least 8)."""
    return max(8, 4 * (os.cpu_count() or 1))


def default_cpu_memory_bytes(nproc: int) -> int:
    """``CPU_MEMORY_FRACTION`` of physical RAM split over ``nproc`` processes."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(CPU_MEMORY_FRACTION * total / nproc)


def _spawned_worker(rank: int, nproc: int, port: int, cfg: LinkBenchConfig, result_path: str,
                    events: "mp.Queue[ProgressEvent]") -> None:
    """One local process: join the gloo group through the parent's store, measure, and (rank 0)
    write the results to ``result_path``. It ignores SIGINT (the parent stops it on Ctrl-C, see
    :func:`profile_cluster`)."""
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, nproc, is_master=False, timeout=timedelta(seconds=cfg.timeout_s))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=nproc,
                            timeout=timedelta(seconds=cfg.timeout_s))
    try:
        res = _run_all(cfg, torch.device("cpu"), events.put, socket.gethostname())
        if res is not None:
            write_json_atomic(result_path, {
                "rank_hosts": res.rank_hosts, "layout": asdict(res.layout), "raw": res.raw.to_json(),
                "compute_flops_per_s": res.compute_flops_per_s,
                "memory_bandwidth_bytes_per_s": res.memory_bandwidth_bytes_per_s, "device_name": res.device_name,
                "concurrent_compute_flops_per_s": res.concurrent_compute_flops_per_s,
            })
    finally:
        dist.destroy_process_group()


def _layout_from_json(d: dict) -> LinkLayout:
    def groups(key: str) -> tuple[MeasuredGroup, ...]:
        return tuple(MeasuredGroup(g["link_class"], tuple(g["ranks"])) for g in d[key])
    return LinkLayout(num_nodes=d["num_nodes"], devices_per_node=d["devices_per_node"],
                      collective_groups=groups("collective_groups"), pairs=groups("pairs"))


def _stop(context: mp.ProcessContext) -> None:
    """Terminate the workers this module started (and only them)."""
    for p in context.processes:
        if p.is_alive():
            p.terminate()
    for p in context.processes:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()


def profile_cluster(nproc: int, *, memory_per_device_bytes: int | None,
                    sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES, max_size_bytes: int | None = None,
                    group_sizes: Sequence[int] | None = None, warmup: int = 2, repeats: int = 9,
                    timeout_s: float = 120.0, matmul_n: int = 1024, progress: ProgressCallback | None = None,
                    name: str | None = None) -> ClusterProfile:
    """Measure ``nproc`` local CPU processes (gloo) as one node of ``nproc`` devices.

    ``memory_per_device_bytes`` is the planning budget per process (default: see
    :func:`default_cpu_memory_bytes`); ``max_size_bytes`` drops the larger ``sizes_bytes``;
    ``group_sizes`` defaults to every power of two up to
    ``nproc`` and ``nproc``; ``timeout_s`` bounds each collective and any silence of the workers
    (after a start-up allowance).  Raises AutoplanError when a worker fails or hangs."""
    if not isinstance(nproc, int) or nproc < 2:
        raise InputError(f"profiling local processes needs nproc >= 2 (one device: profile_one_device), got {nproc!r}")
    if nproc > max_local_processes():
        raise InputError(f"--nproc {nproc} is more processes than this machine can run at once "
                         f"(at most {max_local_processes()}: 4 per CPU core); for a larger cluster run "
                         f"`autoplan profile cluster` under torchrun on every node")
    if memory_per_device_bytes is not None and memory_per_device_bytes <= 0:
        raise InputError(f"memory per device must be positive, got {memory_per_device_bytes}")
    sizes = sorted(set(int(s) for s in sizes_bytes if max_size_bytes is None or s <= max_size_bytes))
    cfg = LinkBenchConfig(sizes_bytes=tuple(sizes), group_sizes=None if group_sizes is None else tuple(group_sizes),
                          warmup=warmup, repeats=repeats, timeout_s=timeout_s, matmul_n=matmul_n)
    plan_link_groups(["localhost"] * nproc, cfg.group_sizes)      # validates the group sizes early
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=timeout_s))
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="autoplan-links-") as tmp:
        result_path = os.path.join(tmp, "rank0.json")
        context = None
        deadline = time.monotonic() + STARTUP_ALLOWANCE_S + timeout_s
        last = "start-up"
        try:
            # The terminal's Ctrl-C goes to the whole process group: the workers (and multiprocessing's
            # resource tracker) ignore it, so that only this process sees it and stops them.
            resource_tracker.ensure_running()     # now: starting it later would unblock SIGINT meanwhile
            with children_ignore([signal.SIGINT]):
                events = ctx.Queue()
                context = mp.start_processes(_spawned_worker, args=(nproc, store.port, cfg, result_path, events),
                                             nprocs=nproc, join=False, start_method="spawn")
            while not context.join(timeout=0.2):
                try:
                    while True:
                        event = events.get_nowait()
                        last, deadline = event.what, time.monotonic() + timeout_s
                        if progress is not None:
                            progress(event)
                except queue.Empty:
                    pass
                if time.monotonic() > deadline:
                    _stop(context)
                    raise AutoplanError(f"cluster profile: no progress for {timeout_s:g} s after {last!r}; "
                                        f"stopped the {nproc} worker processes")
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
            _stop(context)
            first = str(e).strip().splitlines()
            raise AutoplanError(f"cluster profile: a worker process failed after {last!r}: "
                                f"{first[-1] if first else type(e).__name__}") from None
        except BaseException:       # Ctrl-C, SIGTERM: no worker outlives the command
            if context is not None:
                _stop(context)
            raise
        if not os.path.exists(result_path):
            raise AutoplanError("cluster profile: the workers finished without writing results")
        d = json.loads(Path(result_path).read_text())
    res = _RankZeroResult(rank_hosts=d["rank_hosts"], layout=_layout_from_json(d["layout"]),
                          raw=RawLinkTimes.from_json(d["raw"]), compute_flops_per_s=d["compute_flops_per_s"],
                          memory_bandwidth_bytes_per_s=d["memory_bandwidth_bytes_per_s"], device_name=d["device_name"],
                          concurrent_compute_flops_per_s=d["concurrent_compute_flops_per_s"])
    if memory_per_device_bytes is None:
        memory = default_cpu_memory_bytes(nproc)
        memory_source = f"default: {CPU_MEMORY_FRACTION} of physical RAM / {nproc} processes"
    else:
        memory, memory_source = memory_per_device_bytes, "given"
    return _build_profile(res, name=name or f"local-cpu-{nproc}", device_type="cpu", memory_bytes=memory,
                          memory_source=memory_source, cfg=cfg, threads=1)


# --------------------------------------------------------------------------------------------
# inside torchrun (one node or many)
# --------------------------------------------------------------------------------------------

def node_labels(hosts: Sequence[str], group_ranks: Sequence[str | None]) -> list[str]:
    """The node each rank counts as, from every rank's hostname and torchrun ``GROUP_RANK``.

    Under torchrun an agent is a node (``--nnodes``), and ``GROUP_RANK`` is its index.  When the
    hostnames already tell the agents apart (a real cluster: one agent per host) the labels are
    the hostnames; when several agents share a hostname (network namespaces or containers on one
    machine, two agents on one host) the label is ``"host/node<GROUP_RANK>"``.  Without
    ``GROUP_RANK`` on every rank (not under torchrun) the hostnames are used as they are.

    >>> node_labels(["h", "h", "h", "h"], ["0", "0", "1", "1"])
    ['h/node0', 'h/node0', 'h/node1', 'h/node1']
    """
    if len(hosts) != len(group_ranks):
        raise InputError(f"node_labels: {len(hosts)} hostnames but {len(group_ranks)} group ranks")
    if any(g is None for g in group_ranks):
        return list(hosts)
    agents_per_host: dict[str, set[str | None]] = {}
    for h, g in zip(hosts, group_ranks):
        agents_per_host.setdefault(h, set()).add(g)
    if all(len(gs) == 1 for gs in agents_per_host.values()):
        return list(hosts)
    return [f"{h}/node{g}" for h, g in zip(hosts, group_ranks)]


def device_memory_bytes(given: int | None, device: torch.device, processes_per_host: int) -> tuple[int, str]:
    """(memory budget of one device, where it comes from): ``given`` if set, else the GPU's total
    memory, else :func:`default_cpu_memory_bytes` over the processes of one host."""
    if given is not None:
        return given, "given"
    if device.type == "cuda":
        return (torch.cuda.get_device_properties(device).total_memory,
                "measured: torch.cuda.get_device_properties(...).total_memory")
    return (default_cpu_memory_bytes(processes_per_host),
            f"default: {CPU_MEMORY_FRACTION} of physical RAM / {processes_per_host} processes per host")


def profile_cluster_distributed(*, out_path: str | os.PathLike | None = None,
                                memory_per_device_bytes: int | None = None,
                                sizes_bytes: Sequence[int] = DEFAULT_SIZES_BYTES,
                                group_sizes: Sequence[int] | None = None, warmup: int = 2, repeats: int = 9,
                                matmul_n: int | None = None, name: str | None = None,
                                progress: ProgressCallback | None = None,
                                hostname: str | None = None) -> ClusterProfile | None:
    """Measure the cluster this job runs on; call on EVERY rank after ``init_process_group``.

    Ranks are grouped into nodes by hostname, told apart by torchrun's ``GROUP_RANK`` where
    several agents share a hostname (:func:`node_labels`; the same count on each); ``intra_node`` links are
    measured inside the first node and, with several hosts, ``inter_node`` links on groups spread
    over the nodes (module docstring).  On NCCL each rank uses its current CUDA device (set it
    from ``LOCAL_RANK`` before calling), the memory default is the device's total memory and the
    compute rate is a bf16 matmul.  Rank 0 returns the profile (and saves it to ``out_path``);
    the other ranks return None.  Hangs are bounded by the process group's own timeout.
    ``hostname`` (default: :func:`node_labels` of the hostnames and ``GROUP_RANK``) is the node
    this rank counts as; giving it lets one machine stand in for several nodes without torchrun
    agents per node (tests)."""
    if not dist.is_available() or not dist.is_initialized():
        raise InputError("profile_cluster_distributed needs an initialised torch.distributed job (torchrun)")
    use_cuda = dist.get_backend() == "nccl"
    device = torch.device("cpu")
    if use_cuda:
        device = torch.device("cuda", torch.cuda.current_device())
    cfg = LinkBenchConfig(sizes_bytes=tuple(sorted(set(int(s) for s in sizes_bytes))),
                          group_sizes=None if group_sizes is None else tuple(group_sizes), warmup=warmup,
                          repeats=repeats, matmul_n=matmul_n or (8192 if use_cuda else 1024))
    if hostname is None:
        mine = (socket.gethostname(), os.environ.get("GROUP_RANK"))
        everyone: list[tuple[str, str | None] | None] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        labels = node_labels([str(e[0]) for e in everyone if e is not None],
                             [e[1] for e in everyone if e is not None])
        hostname = labels[dist.get_rank()]
    res = _run_all(cfg, device, progress, hostname)
    if res is None:
        return None
    memory, memory_source = device_memory_bytes(memory_per_device_bytes, device, res.layout.devices_per_node)
    profile = _build_profile(res, name=name or f"measured-{res.layout.num_nodes}x{res.layout.devices_per_node}",
                             device_type=device.type, memory_bytes=memory, memory_source=memory_source,
                             cfg=cfg, threads=torch.get_num_threads())
    if out_path is not None:
        profile.save(out_path)
    return profile


def profile_cluster_in_job(*, out_path: str | os.PathLike, memory_per_device_bytes: int | None = None,
                           max_size_bytes: int | None = None, repeats: int = 9, warmup: int = 2,
                           timeout_s: float = 120.0, progress: ProgressCallback | None = None) -> ClusterProfile | None:
    """Join the torchrun job this process is a worker of, measure it, leave; every rank calls this.

    The entry point of ``autoplan profile cluster`` under torchrun (one agent per node, c10d
    rendezvous)::

        torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \
            -m autoplan.cli profile cluster --out cluster.json

    The backend is NCCL when CUDA is available (each rank on device ``LOCAL_RANK``), else gloo
    with one intra-op thread per process; ``timeout_s`` bounds every collective.  Rank 0 writes
    ``out_path`` and returns the profile; the other ranks return None."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise InputError("profile_cluster_in_job runs inside torchrun (RANK and WORLD_SIZE are not set)")
    if memory_per_device_bytes is not None and memory_per_device_bytes <= 0:
        raise InputError(f"memory per device must be positive, got {memory_per_device_bytes}")
    sizes = sorted(s for s in DEFAULT_SIZES_BYTES if max_size_bytes is None or s <= max_size_bytes)
    if len(sizes) < 2:
        raise InputError(f"max size {max_size_bytes} leaves fewer than two message sizes "
                         f"(the smallest are {DEFAULT_SIZES_BYTES[0]} and {DEFAULT_SIZES_BYTES[1]} bytes)")
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    else:
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    try:
        return profile_cluster_distributed(out_path=out_path, memory_per_device_bytes=memory_per_device_bytes,
                                           sizes_bytes=sizes, warmup=warmup, repeats=repeats, progress=progress)
    finally:
        dist.destroy_process_group()



# --------------------------------------------------------------------------------------------
# one device (no links)
# --------------------------------------------------------------------------------------------

CUDA_MATMUL_N = 8192
"""side of the bf16 matrix product timed on a GPU (large enough to reach the achievable rate)"""
CUDA_COPY_BYTES = 1 << 30
"""bytes copied for a GPU's memory bandwidth (many times its L2 cache)"""


def profile_one_device(device: str = "cpu", *, memory_per_device_bytes: int | None = None,
                       matmul_n: int | None = None, repeats: int = 5, name: str | None = None) -> ClusterProfile:
    """Measure one device in this process: a cluster of one node of one device, without links.

    ``device`` is ``cpu`` (this process, with torch's current thread count: what one training
    process uses) or ``cuda`` / ``cuda:N``. The compute rate is the median of ``repeats`` dense
    ``matmul_n``^3 products (fp32 on CPU, bf16 on CUDA; default 1024 and 8192), the bandwidth one
    tensor copy (64 MiB on CPU, 1 GiB on CUDA), the memory the given budget or, by default, the
    GPU's total memory / :func:`default_cpu_memory_bytes` of one process."""
    from autoplan.profile.layers import _resolve_device

    dev = _resolve_device(device)
    if memory_per_device_bytes is not None and memory_per_device_bytes <= 0:
        raise InputError(f"memory per device must be positive, got {memory_per_device_bytes}")
    cuda = dev.type == "cuda"
    if cuda and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    cfg = LinkBenchConfig(repeats=repeats, matmul_n=matmul_n or (CUDA_MATMUL_N if cuda else 1024),
                          copy_bytes=CUDA_COPY_BYTES if cuda else LinkBenchConfig.copy_bytes)
    flops = measure_compute_flops_per_s(cfg.matmul_n, dev, repeats=repeats)
    bw = measure_memory_bandwidth_bytes_per_s(cfg.copy_bytes, dev, repeats=repeats)
    if cuda:
        torch.cuda.empty_cache()
    res = _RankZeroResult(rank_hosts=[socket.gethostname()],
                          layout=LinkLayout(num_nodes=1, devices_per_node=1, collective_groups=(), pairs=()),
                          raw=RawLinkTimes(), compute_flops_per_s=flops, memory_bandwidth_bytes_per_s=bw,
                          device_name=device_name(dev))
    memory, memory_source = device_memory_bytes(memory_per_device_bytes, dev, 1)
    prof = _build_profile(res, name=name or f"one-{dev.type}", device_type=dev.type, memory_bytes=memory,
                          memory_source=memory_source, cfg=cfg, threads=torch.get_num_threads())
    prof.environment["backend"] = "none: one device, no links"
    prof.sources["links"] = "none: a one-device cluster has no links"
    prof.sources.pop("device.concurrent_compute_flops_per_s", None)
    return prof
