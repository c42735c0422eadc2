"""Measure a cluster: collectives per group size (alpha-beta fits), device compute and memory rates.

Three entry points; the first two share one measurement engine
(:func:`autoplan.profile.link_bench.measure_links`):

- :func:`profile_cluster` spawns ``nproc`` local processes (gloo on 127.0.0.1, one intra-op thread
  each) and measures them as one node;
- :func:`profile_cluster_distributed` runs inside an already initialised job (``torchrun``, one or
  many nodes, gloo or NCCL), groups the ranks by hostname, and measures the links inside a node
  (``intra_node``) and, when there are several hosts, between nodes (``inter_node``);
- :func:`profile_one_device` measures one device in this process (``--nproc 1``: a CPU process, or
  one GPU): its matmul rate, copy bandwidth and memory, and no links: a one-device cluster, on
  which the planner still chooses the micro-batch size and recomputation.

:func:`measure_cluster` (``autoplan profile cluster``) chooses among them from the process count and device.

What is measured and on which groups is in :mod:`autoplan.profile.link_bench` (the engine, run
on every rank), one device's rates in :mod:`autoplan.profile.device_rates`, the fit in
:mod:`autoplan.profile.fit`, the spawning and watching of local workers in
:mod:`autoplan.profile.local_workers`.

Device memory: the given budget, or on CPU ``CPU_MEMORY_FRACTION`` of physical RAM divided by the
number of processes; on CUDA the device's total memory.

Run::

    python -c "from autoplan.profile.links import profile_cluster; print(profile_cluster(2, memory_per_device_bytes=None).to_dict())"
"""

from __future__ import annotations

import os
import re
import socket
from datetime import timedelta
from typing import Sequence

import torch
import torch.distributed as dist

from autoplan.errors import InputError
from autoplan.profile.device_rates import measure_compute_flops_per_s, measure_memory_bandwidth_bytes_per_s
from autoplan.profile.formats import ClusterProfile
from autoplan.profile.link_bench import (DEFAULT_SIZES_BYTES, LinkBenchConfig, LinkLayout, RankZeroResult,
                                         RawLinkTimes, build_profile, plan_link_groups, run_all)
from autoplan.profile.local_workers import max_local_processes, run_local_workers
from autoplan.profile.timing import ProgressCallback, device_name, resolve_device

CPU_MEMORY_FRACTION = 0.75
"""default per-process budget on CPU: this share of physical RAM, split evenly over the
processes; the rest is left to the OS, the Python interpreters and torch's own allocations"""

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


# --------------------------------------------------------------------------------------------
# the measurement engine (runs on every rank of an initialised process group)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# local processes
# --------------------------------------------------------------------------------------------


def default_cpu_memory_bytes(nproc: int) -> int:
    """``CPU_MEMORY_FRACTION`` of physical RAM split over ``nproc`` processes."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(CPU_MEMORY_FRACTION * total / nproc)


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
    res = run_local_workers(nproc, cfg, progress)
    if memory_per_device_bytes is None:
        memory = default_cpu_memory_bytes(nproc)
        memory_source = f"default: {CPU_MEMORY_FRACTION} of physical RAM / {nproc} processes"
    else:
        memory, memory_source = memory_per_device_bytes, "given"
    return build_profile(res, name=name or f"local-cpu-{nproc}", device_type="cpu", memory_bytes=memory,
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
    res = run_all(cfg, device, progress, hostname)
    if res is None:
        return None
    memory, memory_source = device_memory_bytes(memory_per_device_bytes, device, res.layout.devices_per_node)
    profile = build_profile(res, name=name or f"measured-{res.layout.num_nodes}x{res.layout.devices_per_node}",
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
    dev = resolve_device(device)
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
    res = RankZeroResult(rank_hosts=[socket.gethostname()],
                          layout=LinkLayout(num_nodes=1, devices_per_node=1, collective_groups=(), pairs=()),
                          raw=RawLinkTimes(), compute_flops_per_s=flops, memory_bandwidth_bytes_per_s=bw,
                          device_name=device_name(dev))
    memory, memory_source = device_memory_bytes(memory_per_device_bytes, dev, 1)
    prof = build_profile(res, name=name or f"one-{dev.type}", device_type=dev.type, memory_bytes=memory,
                          memory_source=memory_source, cfg=cfg, threads=torch.get_num_threads())
    prof.environment["backend"] = "none: one device, no links"
    prof.sources["links"] = "none: a one-device cluster has no links"
    prof.sources.pop("device.concurrent_compute_flops_per_s", None)
    return prof


def measure_cluster(nproc: int | None, *, out_path: str | os.PathLike, device: str = "cpu",
                    memory_per_device_bytes: int | None = None, max_size_bytes: int | None = None,
                    repeats: int = 5, progress: ProgressCallback | None = None) -> ClusterProfile | None:
    """``autoplan profile cluster``: one device in this process (``nproc`` 1, on ``device``),
    ``nproc`` local CPU processes, or (``nproc`` None) the torchrun job this process is a worker of;
    in a job only rank 0 gets the profile (and writes ``out_path``), the other ranks None. The caller
    saves a profile it gets."""
    if nproc is not None and nproc < 1:
        raise InputError(f"--nproc must be >= 1, got {nproc}")
    if nproc == 1:
        return profile_one_device(device, memory_per_device_bytes=memory_per_device_bytes)
    if nproc is not None and device != "cpu":
        raise InputError(f"--device {device}: several local processes are measured as CPU processes; "
                         f"for several GPUs run under torchrun (see --help)")
    if nproc is None:
        if "RANK" not in os.environ:
            raise InputError("profile cluster needs --nproc N (local processes), or to run under torchrun")
        return profile_cluster_in_job(out_path=out_path, memory_per_device_bytes=memory_per_device_bytes,
                                      max_size_bytes=max_size_bytes, repeats=repeats)
    return profile_cluster(nproc, memory_per_device_bytes=memory_per_device_bytes, max_size_bytes=max_size_bytes,
                           repeats=repeats, progress=progress)
