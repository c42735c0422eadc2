"""The hardware catalogue: published accelerator and system figures, each with its source.

``catalogue_cluster("dgx-h100-80gb:16")`` builds a cluster profile (``source: "catalogue"``) for
16 nodes of 8 GPUs without any hardware, so the planner can answer "how would this train there".

Published figures (``/work/shared/HARDWARE.md`` collects them) are kept apart from the
ASSUMPTIONS that turn peaks into achievable rates; the assumptions are a dataclass with the
evidence for each default (``assumptions.CatalogueAssumptions``, beside every other assumption of
the analytic model), and can be overridden (``catalogue_cluster(spec, assumptions=...)``).

Link model (alpha-beta per op and group size ``g``; ``n`` is the full tensor of the collective,
as in ``links.py``)::

    intra_node (NVSwitch: every pair of GPUs at full NVLink rate, whatever g)
      all_reduce      t = lat(g)   + 2(g-1)/g * n / busbw_all_reduce
      all_gather,     t = lat(g)/2 +  (g-1)/g * n / busbw_gather
      reduce_scatter      busbw_gather = min(busbw_all_reduce, collective_link_fraction * NVLink)
                          (all-gather/reduce-scatter get no NVLS in-switch reduction)
      send_recv       t = lat(2)   + n / (send_recv_link_fraction * NVLink)
      lat(g) = lat_8 * (g-1)/7: the latency fitted to the 8-GPU curve, one ring step per peer

    inter_node (a group that spans nodes; DGX: one InfiniBand port per GPU)
      per-GPU IB bandwidth  B = ports * port rate / GPUs per node * ib_efficiency
      all_reduce      t = lat(g)   + 2(g-1) * ib_latency + 2(g-1)/g * n / B
      all_gather,     t = lat(g)/2 +  (g-1) * ib_latency +  (g-1)/g * n / B
      reduce_scatter
      send_recv       t = lat(2) + ib_latency + n / B

The inter-node model is a flat ring held back by each GPU's own NIC.  It is exact for groups
with one rank per node (data parallel across nodes with TP = 8 inside) and CONSERVATIVE for
groups with k > 1 ranks per node, which NCCL runs hierarchically (intra-node reduce-scatter, then
1/k of the data over each of k NICs): 32 H200 (4 nodes) measured 369 GB/s bus bandwidth, where
this model says ib_efficiency * 50 = 35 GB/s.  A profile fitted per (op, g) cannot tell k; the
planner would need ranks-per-node to use the hierarchical figure.  With a software stack the
planner does (``hierarchical_collective_s``), and charges all-gather and reduce-scatter NCCL's own
ring latency, one step per rank of the group (``NCCL_RING_PROTOCOLS``), not only the
``ib_latency`` per node above, which is the wire's.

Run::

    python -c "from autoplan.profile.hardware import catalogue_cluster; print(catalogue_cluster('dgx-a100-80gb:2').to_dict())"
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from autoplan.errors import InputError
from autoplan.profile.assumptions import CatalogueAssumptions
from autoplan.profile.fit import fit_alpha_beta
from autoplan.profile.formats import ClusterProfile, DeviceSpec, LinkFit

GB = 10 ** 9          # datasheets use decimal units
MIB = 2 ** 20
GIB = 2 ** 30


@dataclass(frozen=True)
class AcceleratorSpec:
    """Published figures of one accelerator (peaks, not achievable rates)."""

    name: str
    peak_16bit_matmul_flops_per_s: float
    """dense bf16/fp16 tensor-core peak (no sparsity)"""
    memory_bytes: int
    """datasheet capacity in decimal bytes (e.g. 80 GB = 80e9; the device reports a little more,
    about what the CUDA context and allocator reserve)"""
    memory_bandwidth_bytes_per_s: float
    nvlink_bytes_per_s: float
    """NVLink bandwidth per GPU per direction"""
    source: str
    sm_count: int = 0
    """streaming multiprocessors (a GEMM runs in waves of one output tile per SM; 0: unknown)"""
    large_gemm_flops_per_s: float = 0.0
    """a measured 16-bit GEMM rate at 8192 x 8192 x 8192 (0: none published)"""
    large_gemm_source: str = ""
    family: str = ""
    """the chip, for kernel efficiencies measured per chip (A100, H100, H200, V100)"""
    peak_fp8_matmul_flops_per_s: float = 0.0
    """dense fp8 tensor-core peak (no sparsity); 0: the chip has no fp8 tensor cores"""


# NVIDIA A100 Tensor Core GPU datasheet: 312 TFLOP/s bf16 dense (624 with sparsity), 80 GB HBM2e,
# 2,039 GB/s, NVLink3 12 links 600 GB/s bidirectional = 300 GB/s per direction.
# 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper).  Large GEMM: "Maximum Achievable
# Matmul FLOPS" table (stas00/ml-engineering, compute/accelerator/README.md): A100 SXM bf16 271.2
# TFLOP/s = 86.9% of peak (torch 2.6, cu126); a cuBLAS 8192^3 benchmark prints 271.32 (87.0%).
MAMF_SOURCE = "Maximum Achievable Matmul FLOPS table, stas00/ml-engineering compute/accelerator/README.md"
A100_SXM4_80GB = AcceleratorSpec("A100 SXM4 80GB", 312e12, 80 * GB, 2.039e12, 300e9,
                                 "NVIDIA A100 Tensor Core GPU datasheet", sm_count=108,
                                 large_gemm_flops_per_s=271.2e12,
                                 large_gemm_source=f"A100 SXM bf16 271.2 TFLOP/s ({MAMF_SOURCE})", family="A100")
# NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989 TFLOP/s bf16 dense (1,979 fp8), 80 GB HBM3,
# 3.35 TB/s, NVLink4 18 links 900 GB/s bidirectional = 450 GB/s per direction.
# 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, SXM5).  Large GEMM: H100 SXM bf16
# 794.5 TFLOP/s = 80.3% of peak (same MAMF table; "H200 is the same": one H200 measured 790 at 8192^3,
# HARDWARE.md).
H100_SXM5_80GB = AcceleratorSpec("H100 SXM5 80GB", 989e12, 80 * GB, 3.35e12, 450e9,
                                 "NVIDIA H100 Tensor Core GPU datasheet", sm_count=132,
                                 large_gemm_flops_per_s=794.5e12,
                                 large_gemm_source=f"H100 SXM bf16 794.5 TFLOP/s ({MAMF_SOURCE})", family="H100",
                                 peak_fp8_matmul_flops_per_s=1979e12)
# NVIDIA H200 Tensor Core GPU datasheet (SXM): 989 TFLOP/s bf16 dense (1,979 fp8), 141 GB HBM3e, 4.8 TB/s,
# NVLink4 900 GB/s bidirectional = 450 GB/s per direction.
H200_SXM_141GB = AcceleratorSpec("H200 SXM 141GB", 989e12, 141 * GB, 4.8e12, 450e9,
                                 "NVIDIA H200 Tensor Core GPU datasheet", sm_count=132,
                                 large_gemm_flops_per_s=790e12,
                                 large_gemm_source="bf16 8192^3 measured on one H200: 790 TFLOP/s (HARDWARE.md)",
                                 family="H200", peak_fp8_matmul_flops_per_s=1979e12)
# NVIDIA V100 Tensor Core GPU datasheet (SXM2 32GB): 125 TFLOP/s fp16 tensor, 32 GB HBM2, 900 GB/s,
# NVLink2 300 GB/s bidirectional = 150 GB/s per direction.
V100_SXM2_32GB = AcceleratorSpec("V100 SXM2 32GB", 125e12, 32 * GB, 0.9e12, 150e9,
                                 "NVIDIA V100 Tensor Core GPU datasheet", sm_count=80, family="V100")

ACCELERATORS: dict[str, AcceleratorSpec] = {a.name: a for a in
                                            (A100_SXM4_80GB, H100_SXM5_80GB, H200_SXM_141GB, V100_SXM2_32GB)}

CUDA_DEVICE_NAMES: dict[str, AcceleratorSpec] = {
    "NVIDIA H200": H200_SXM_141GB,            # seen: torch.cuda.get_device_name on the H200 lent 2026-12-04
    "NVIDIA H100 80GB HBM3": H100_SXM5_80GB,  # the SXM5 part (the PCIe one is "NVIDIA H100 PCIe")
    "NVIDIA A100-SXM4-80GB": A100_SXM4_80GB,
    "Tesla V100-SXM2-32GB": V100_SXM2_32GB,
}
"""The names ``torch.cuda.get_device_name`` gives the catalogue's chips, which a measured cluster
profile records (``profile cluster --device cuda``): with them a measured GPU is the catalogue chip for
the analytic model (its SM count, fp8 rate).  Other parts of the same family (PCIe, NVL, 40 GB) are
other chips and stay unmatched."""


@dataclass(frozen=True)
class SystemSpec:
    """One node type: its GPUs, its inter-node fabric and a measured all-reduce figure."""

    name: str
    accelerator: AcceleratorSpec
    gpus_per_node: int
    ib_ports: int
    ib_port_bytes_per_s: float
    """one InfiniBand port, one direction"""
    fabric_source: str
    all_reduce_busbw_bytes_per_s: float
    """nccl-tests all-reduce bus bandwidth, 8 GPUs in one node, large messages"""
    all_reduce_source: str


# DGX A100 datasheet: 8 A100, NVSwitch, 8 single-port HDR InfiniBand 200 Gb/s (25 GB/s) for compute.
# nccl-tests all-reduce on 8 A100: about 235 GB/s bus bandwidth at large sizes (HARDWARE.md).
DGX_A100_80GB = SystemSpec("dgx-a100-80gb", A100_SXM4_80GB, 8, 8, 25e9, "NVIDIA DGX A100 datasheet",
                           235e9, "nccl-tests all-reduce, 8x A100 in one node, large messages (HARDWARE.md)")
# DGX H100 / BasePOD: 8 H100, NVSwitch, 8 ConnectX-7 400 Gb/s (50 GB/s) for compute.
# nccl-tests all-reduce 8x H100: 466 GB/s at 1 GB, 480 at 8-16 GB with NVLS (HARDWARE.md).
DGX_H100_80GB = SystemSpec("dgx-h100-80gb", H100_SXM5_80GB, 8, 8, 50e9, "NVIDIA DGX BasePOD documentation",
                           480e9, "nccl-tests all-reduce, 8x H100 in one node, 8-16 GB, NVLS (HARDWARE.md)")
# DGX H200: same fabric as DGX H100.  nccl-tests all-reduce 8x H200, one node: 482 GB/s at 16 GiB.
DGX_H200_141GB = SystemSpec("dgx-h200-141gb", H200_SXM_141GB, 8, 8, 50e9, "NVIDIA DGX BasePOD documentation",
                            482e9, "nccl-tests all-reduce, 8x H200 in one node, 16 GiB (HARDWARE.md)")

# Jean Zay gpu_p5 (IDRIS; BLOOM's machine): 8 A100 80GB per node with NVLink, 4 Omni-Path 100 Gb/s
# links per node (bigscience train/tr11-176B-ml README, "Hardware"); NVLink all-reduce as DGX A100 (assumed).
JEAN_ZAY_A100_80GB = SystemSpec("jean-zay-a100-80gb", A100_SXM4_80GB, 8, 4, 12.5e9,
                                "bigscience tr11-176B-ml README: 4 OmniPath links per node (100 Gb/s each)",
                                235e9, "as DGX A100 (assumed)")

SYSTEMS: dict[str, SystemSpec] = {s.name: s for s in (DGX_A100_80GB, DGX_H100_80GB, DGX_H200_141GB,
                                                      JEAN_ZAY_A100_80GB)}

# nccl-tests all-reduce bus bandwidth on 8x H100 in one node (HARDWARE.md): (message bytes, busbw B/s).
# The all-reduce latency of every catalogue system is fitted to this curve.
H100_ALL_REDUCE_CURVE: tuple[tuple[int, float], ...] = (
    (2 * MIB, 87e9), (16 * MIB, 237e9), (64 * MIB, 362e9), (128 * MIB, 401e9), (512 * MIB, 437e9),
    (1 * GIB, 466e9), (8 * GIB, 480e9), (16 * GIB, 480e9))
H100_ALL_REDUCE_CURVE_SOURCE = "nccl-tests all-reduce, 8x H100 in one node, 2 MB .. 16 GB (HARDWARE.md)"


FALLBACK_MATMUL_EFFICIENCY = 0.7
"""achievable / peak for an accelerator without a published large-GEMM measurement (the usual 0.6-0.8)"""


def large_gemm_rate(acc: AcceleratorSpec, a: CatalogueAssumptions | None = None) -> float:
    """The achievable large-GEMM FLOP/s of ``acc``: the assumption's override, else the measured rate."""
    a = a or CatalogueAssumptions()
    if a.matmul_efficiency > 0:
        return acc.peak_16bit_matmul_flops_per_s * a.matmul_efficiency
    if acc.large_gemm_flops_per_s > 0:
        return acc.large_gemm_flops_per_s
    return acc.peak_16bit_matmul_flops_per_s * FALLBACK_MATMUL_EFFICIENCY


def accelerator_of(device_name: str) -> AcceleratorSpec | None:
    """The catalogue accelerator a device spec names (the catalogue's name, or the name torch gives
    that chip: :data:`CUDA_DEVICE_NAMES`), if any."""
    return ACCELERATORS.get(device_name) or CUDA_DEVICE_NAMES.get(device_name)


NCCL_RING_PROTOCOLS: dict[str, tuple[float, float, float, float]] = {
    # protocol: (base latency, latency per NVLink step, per network step, bandwidth / Simple's)
    "LL": (6.6e-6, 1.0e-6, 2.7e-6, 1 / 4),
    "LL128": (14.0e-6, 1.9e-6, 4.0e-6, 0.92),
    "Simple": (8.4e-6, 3.4e-6, 14.0e-6, 1.0),
}
"""NCCL's own cost model of a ring all-gather or reduce-scatter, the one it picks an algorithm and a
protocol with (NVIDIA/nccl ``src/graph/tuning.cc``, ``ncclTopoTuneModel``, releases 2.18-2.21): latency
``baseLat + (nsteps - nInterSteps) * intraLat + nInterSteps * interLat`` with ``nsteps = ranks - 1``
and ``nInterSteps = nodes - 1``, from its tables ``baseLat`` (ring: LL 6.6, LL128 14.0, Simple 8.4 us),
``hwLat`` NVLink ring (LL 0.6, LL128 1.9, Simple 3.4 us; across nodes never below the network post
overhead, 1 us on Intel hosts, 3 us for Simple: LL 1.0) and network ring (LL 2.7, LL128 4.0, Simple 14.0 us); bandwidth: LL a quarter
of the ring's across nodes, LL128 0.92 of it (0.7 with one rank per node), Simple all of it.  A ring
has no shortcut: every one of its ranks - 1 steps waits for the previous one, so its latency grows
with the group, not with the number of nodes alone (NCCL's tree, log2 of the nodes, serves all-reduce
only; PAT, NCCL 2.23, only groups of one rank per node).  The Llama 3 paper (arXiv 2407.21783,
section 3.3.4) names this latency as what made FSDP's all-gather and reduce-scatter slow at 16K GPUs,
with hops of up to tens of microseconds in a three-layer Clos network: these figures are the lower end"""


def ring_latency_s(protocol: str, group: int, nodes: int) -> float:
    """NCCL's predicted latency of a ring all-gather or reduce-scatter over ``group`` ranks on
    ``nodes`` nodes under ``protocol`` (:data:`NCCL_RING_PROTOCOLS`)."""
    base, intra, inter, _ = NCCL_RING_PROTOCOLS[protocol]
    return base + (group - nodes) * intra + (nodes - 1) * inter


def nccl_ring_s(bandwidth_s: float, group: int, nodes: int) -> float:
    """A ring all-gather or reduce-scatter over ``group`` ranks on ``nodes`` nodes that moves its bytes
    in ``bandwidth_s`` at Simple's rate: latency plus bandwidth time under the fastest protocol
    (LL128 keeps 0.7 of the rate with one rank per node, NCCL's figure)."""
    def under(protocol: str) -> float:
        rate = NCCL_RING_PROTOCOLS[protocol][3]
        if protocol == "LL128" and group < 2 * nodes:
            rate = 0.7
        return ring_latency_s(protocol, group, nodes) + bandwidth_s / rate
    return min(under(p) for p in NCCL_RING_PROTOCOLS)


def hierarchical_collective_s(cluster: ClusterProfile, op: str, nbytes: float, group: int, per_node: int) -> float:
    """A collective over ``group`` ranks spanning nodes with ``per_node`` of them on each node, as NCCL
    runs it on a rail-optimised DGX fabric (one NIC per GPU): between nodes the collective over
    ``group / per_node`` nodes on 1/per_node of the data, every GPU driving its own NIC, pipelined
    with the NVLink phase inside each node, so the slower of the two sets the time.  This is the
    model the catalogue's ``ib_efficiency`` was derived with (module docstring; it reproduces the
    369 GB/s measured on 4 nodes of 8 H200).  ``per_node = 1`` is the flat ring.

    All-gather and reduce-scatter are one ring through every rank (NCCL has no other algorithm for
    them across nodes): their bandwidth time is the above, their latency NCCL's own model of the ring
    (:data:`NCCL_RING_PROTOCOLS`, one step per rank), with the protocol NCCL would pick (the fastest).
    For 8,192 ranks on 2,048 nodes that is 20 ms (LL128) per collective, where hops of the wire's
    latency alone would say 1.2 ms."""
    if group <= 1 or nbytes <= 0:
        return 0.0
    k = max(1, min(per_node, group))
    nodes = max(1, group // k)
    if op in ("all_gather", "reduce_scatter") and nodes > 1:
        inter_bw = nbytes / k / cluster.link(op, nodes, True).bandwidth_bytes_per_s
        intra_bw = nbytes / cluster.link(op, k, False).bandwidth_bytes_per_s if k > 1 else 0.0
        return nccl_ring_s(max(inter_bw, intra_bw), group, nodes)
    inter = cluster.collective_time_s(op, nbytes / k, nodes, True) if nodes > 1 else 0.0
    if k == 1:
        return inter
    return max(inter, cluster.collective_time_s(op, nbytes, k, False))


def _h100_all_reduce_fit() -> LinkFit:
    """Alpha-beta fit of the 8-GPU H100 all-reduce curve, as time per message (algbw = busbw *
    g / (2(g-1)) with g = 8)."""
    g = 8
    sizes = [n for n, _ in H100_ALL_REDUCE_CURVE]
    times = [n / (busbw * g / (2 * (g - 1))) for n, busbw in H100_ALL_REDUCE_CURVE]
    return fit_alpha_beta(sizes, times)


def parse_cluster_spec(spec: str) -> tuple[SystemSpec, int]:
    """``"dgx-a100-80gb:16"`` -> (the DGX A100 spec, 16 nodes); a bare name is one node."""
    name, colon, count = spec.strip().partition(":")
    if name not in SYSTEMS:
        raise InputError(f"unknown cluster {spec[:60]!r}: known catalogue entries are "
                         f"{', '.join(s + ':NODES' for s in SYSTEMS)}, or give a cluster profile JSON")
    if not colon:
        return SYSTEMS[name], 1
    max_nodes = 2 ** 20 // SYSTEMS[name].gpus_per_node      # formats.MAX_DEVICES devices
    if not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= max_nodes:
        raise InputError(f"cluster {spec[:60]!r}: the node count after ':' must be an integer from 1 to {max_nodes}")
    return SYSTEMS[name], int(count)


def _powers_of_two(upto: int) -> list[int]:
    return [2 ** i for i in range(1, upto.bit_length()) if 2 ** i <= upto]


def catalogue_cluster(spec: str, assumptions: CatalogueAssumptions | None = None) -> ClusterProfile:
    """A cluster profile for ``NAME[:NODES]`` from published figures (module docstring)."""
    system, num_nodes = parse_cluster_spec(spec)
    return system_cluster(system, num_nodes, assumptions)


def system_cluster(system: SystemSpec, num_nodes: int, assumptions: CatalogueAssumptions | None = None
                   ) -> ClusterProfile:
    """A cluster profile for ``num_nodes`` nodes of ``system`` (a catalogue entry or one described
    from its own published figures, e.g. a published training run's machine)."""
    a = assumptions or CatalogueAssumptions()
    acc = system.accelerator
    per_node = system.gpus_per_node
    lat8 = _h100_all_reduce_fit().latency_s

    def lat(g: int) -> float:
        return lat8 * (g - 1) / (per_node - 1)

    busbw_ar = system.all_reduce_busbw_bytes_per_s
    busbw_gather = min(busbw_ar, a.collective_link_fraction * acc.nvlink_bytes_per_s)
    p2p_bw = a.send_recv_link_fraction * acc.nvlink_bytes_per_s
    ib_bw = system.ib_ports * system.ib_port_bytes_per_s / per_node * a.ib_efficiency

    def ring(g: int, busbw: float, all_reduce: bool) -> float:
        """Algorithm bandwidth (bytes of n per second) of a ring at bus bandwidth ``busbw``."""
        return busbw * g / ((2 if all_reduce else 1) * (g - 1))

    intra = {
        "all_reduce": {g: LinkFit(lat(g), ring(g, busbw_ar, True)) for g in _powers_of_two(per_node)},
        "all_gather": {g: LinkFit(lat(g) / 2, ring(g, busbw_gather, False)) for g in _powers_of_two(per_node)},
        "send_recv": {2: LinkFit(lat(2), p2p_bw)},
    }
    intra["reduce_scatter"] = dict(intra["all_gather"])
    links = {"intra_node": intra}
    if num_nodes > 1:
        world = num_nodes * per_node
        links["inter_node"] = {
            "all_reduce": {g: LinkFit(lat(min(g, per_node)) + 2 * (g - 1) * a.ib_latency_s, ring(g, ib_bw, True))
                           for g in _powers_of_two(world)},
            "all_gather": {g: LinkFit(lat(min(g, per_node)) / 2 + (g - 1) * a.ib_latency_s, ring(g, ib_bw, False))
                           for g in _powers_of_two(world)},
            "send_recv": {2: LinkFit(lat(2) + a.ib_latency_s, ib_bw)},
        }
        links["inter_node"]["reduce_scatter"] = dict(links["inter_node"]["all_gather"])

    device = DeviceSpec(type="cuda", name=acc.name, memory_bytes=acc.memory_bytes,
                        compute_flops_per_s=large_gemm_rate(acc, a),
                        memory_bandwidth_bytes_per_s=acc.memory_bandwidth_bytes_per_s * a.memory_bandwidth_efficiency)
    sources = {
        "device.memory_bytes": f"{acc.memory_bytes / GB:.0f} GB ({acc.source})",
        "device.compute_flops_per_s": (f"{acc.peak_16bit_matmul_flops_per_s / 1e12:.0f} TFLOP/s 16-bit dense peak "
                                       f"({acc.source}) x matmul_efficiency {a.matmul_efficiency} (assumption)"
                                       if a.matmul_efficiency > 0 else
                                       f"large GEMM {large_gemm_rate(acc, a) / 1e12:.0f} TFLOP/s "
                                       f"({acc.large_gemm_source or 'no measurement: 0.7 x peak'})"),
        "device.memory_bandwidth_bytes_per_s": f"{acc.memory_bandwidth_bytes_per_s / 1e12:.3f} TB/s ({acc.source}) "
                                               f"x memory_bandwidth_efficiency {a.memory_bandwidth_efficiency}",
        "nvlink": f"{acc.nvlink_bytes_per_s / GB:.0f} GB/s per GPU per direction ({acc.source})",
        "intra_node.all_reduce": f"bus bandwidth {busbw_ar / GB:.0f} GB/s ({system.all_reduce_source}); "
                                 f"latency {lat8 * 1e6:.1f} us on 8 GPUs, fitted to {H100_ALL_REDUCE_CURVE_SOURCE}",
        "intra_node.all_gather/reduce_scatter": f"bus bandwidth min(all-reduce, {a.collective_link_fraction} x NVLink)",
        "intra_node.send_recv": f"{a.send_recv_link_fraction} x NVLink (assumption from an A100 pair, HARDWARE.md)",
        "inter_node": f"{system.ib_ports} x {system.ib_port_bytes_per_s / GB:.0f} GB/s InfiniBand per node "
                      f"({system.fabric_source}) / {per_node} GPUs x ib_efficiency {a.ib_efficiency}; "
                      f"hop latency {a.ib_latency_s * 1e6:.1f} us; flat ring per GPU NIC (conservative for groups "
                      f"with several ranks per node)",
    }
    environment = {"catalogue": system.name, "assumptions": asdict(a),
                   "message_size": "n = full tensor of the collective (all_gather: gathered output)"}
    return ClusterProfile(name=f"{system.name}:{num_nodes}", num_nodes=num_nodes, devices_per_node=per_node,
                          device=device, links=links, environment=environment, source="catalogue",
                          sources=sources, rank_hosts=[])


def with_assumptions(**overrides: float) -> CatalogueAssumptions:
    """The default assumptions with some replaced, e.g. ``with_assumptions(matmul_efficiency=0.6)``;
    InputError on an unknown name or a non-positive value."""
    known = set(asdict(CatalogueAssumptions()))
    bad = [k for k in overrides if k not in known]
    if bad:
        raise InputError(f"unknown catalogue assumption(s) {', '.join(bad)} (known: {', '.join(sorted(known))})")
    if any(v <= 0 for v in overrides.values()):
        raise InputError("catalogue assumptions must be positive")
    return replace(CatalogueAssumptions(), **overrides)
