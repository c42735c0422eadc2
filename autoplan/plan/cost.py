"""The cost model: predicted step time and per-device memory of a layout, term by term.

Everything the solver optimises comes from here, so ``estimate`` and ``solve`` agree by
construction. For a fixed *outer* layout (dp, tp, pp, vp, mbs, m, zero, recompute, schedule, sp)
every quantity is a sum over layers of a per-layer coefficient (:class:`LayerCost`), which is what
lets the placement of layers on stages be an ILP (``ilp.py``).

Step time (seconds), with S = pp*vp chunks, chunk j on pipeline rank j mod pp, m micro-batches::

    c_l      = fwd_l + bwd_l + recompute_l + tp_comm_l          per micro-batch, layer l
    tau_r    = sum_{chunks j of rank r} ( sum_{l in j} c_l + p2p out of j )
    pipeline = (m - 1/vp) * max_r tau_r + (1/vp) * sum_r tau_r
             = m * tau_max            (the bottleneck rank's steady state: compute, tp_comm, p2p)
               + (sum_r tau_r - tau_max) / vp                           (bubble: fill and drain)
    step     = pipeline + max_r dp_sync_r + max_r optimizer_r + overhead

``overhead`` and the scale factors on compute and communication coefficients come from the
cluster profile's calibration (``validate --calibrate``); uncalibrated they are 0 and 1.

For vp = 1 this is the classic (m-1)*max + sum, i.e. the (p-1)/m bubble of GPipe/1F1B for balanced
stages; interleaving divides the bubble by vp. Data-parallel gradient synchronisation and the
optimizer step are counted as exposed (not overlapped with backward): a conservative model that
calibration (``validate --calibrate``) can correct.

Memory (bytes) of a device of pipeline rank r, following what the executor runs
(:mod:`autoplan.execute.dp`: DDP for ZeRO-0 without TP or PP, FSDP2 ``fully_shard`` otherwise),
with P_l the parameters of layer l on one device (divided by tp for tensor-parallel layers) and
w, g, o the weight, gradient and optimizer-state bytes per parameter::

    static_l = P_l * (w + g + o)                                        dp = 1
             = P_l * (w + 2g + o)                 DDP: gradients are copied into its buckets
             = P_l * ((w + g + o)/dp              FSDP: sharded parameters, gradients, state
                      + w [zero < 3]              the gathered weights, kept from forward to backward
                      + g [m > 1])                unsharded gradients accumulated over micro-batches
    acts     = inflight_r * sum_l act_l           (act_l after TP/SP and recomputation)
    inflight = 1 (no PP) | m (GPipe) | min(m, pp-r) (1F1B)
             | min(m, ((vp-1)*pp + 2*(pp-1-r) + 1) / vp) (interleaved: torch's warm-up, m >= pp)
    buffers  = boundary tensors received and sent (the executor asks the schedule not to keep the
               last stage's outputs: ``step(..., return_outputs=False)``)
    workspace= ZeRO-3: two layers' gathered weights; FSDP without accumulation: one layer's unsharded
               gradient before its reduce-scatter; full recompute: one layer's activations; and the
               gradient of the largest layer output (the logits) during backward

FSDP traffic per step: ZeRO 0-2 all-gather the weights once and reduce-scatter the gradients once;
ZeRO-3 re-gathers for every micro-batch's forward and backward (2*m all-gathers). DDP all-reduces
the gradients once (no sync while accumulating).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoplan.errors import InputError
from autoplan.plan.plan import POWERSGD_RANK, Layout, Prediction
from autoplan.profile.formats import ClusterProfile, ModelProfile

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class TrainingConfig:
    """What is being trained, apart from the layout."""

    global_batch: int
    """samples (sequences) per optimizer step"""
    precision: str = "fp32"
    """fp32, or bf16/fp16 mixed precision (16-bit weights/grads/activations, fp32 master + moments)"""
    optimizer: str = "adamw"
    """adamw (two fp32 moments) or sgd (no state)"""

    def __post_init__(self) -> None:
        if self.global_batch < 1:
            raise InputError(f"global batch must be positive, got {self.global_batch}")
        if self.precision not in BYTES_PER_ELEMENT:
            raise InputError(f"precision must be one of {'|'.join(BYTES_PER_ELEMENT)}, got {self.precision!r}")
        if self.optimizer not in ("adamw", "sgd"):
            raise InputError(f"optimizer must be adamw or sgd, got {self.optimizer!r}")

    def state_bytes_per_param(self) -> tuple[int, int, int]:
        """(weight, gradient, optimizer-state) bytes per parameter.

        fp32: 4 + 4 + (8 for AdamW's two moments | 0 for SGD).
        bf16/fp16 mixed: 2 + 2 + (12: fp32 master + two moments | 4: fp32 master) -- the
        "16 bytes per parameter" rule (DESIGN.md)."""
        if self.precision == "fp32":
            return 4, 4, (8 if self.optimizer == "adamw" else 0)
        return 2, 2, (12 if self.optimizer == "adamw" else 4)


@dataclass(frozen=True)
class LayerCost:
    """Per-layer coefficients for one outer layout. Times per micro-batch unless noted.
    Layers of one kind share one (immutable) instance."""

    compute_s: float
    """forward + backward"""
    recompute_s: float
    """forward work repeated in backward by activation recomputation"""
    tp_comm_s: float
    """tensor-parallel collectives (forward and backward)"""
    p2p_s: float
    """sending this layer's output to the next stage and its gradient back, if cut after it"""
    dp_sync_s: float
    """per step: data-parallel gradient (and ZeRO weight) collectives for this layer's params"""
    optimizer_s: float
    """per step: optimizer update of this layer's params on one device"""
    static_bytes: int
    """weights + gradients + optimizer state held by one device"""
    act_bytes: int
    """activations saved for backward, per in-flight micro-batch, on one device"""
    out_bytes: int
    """boundary tensor per micro-batch (what a pipeline cut after this layer sends)"""
    full_act_bytes: int
    """activations of this layer without recomputation (the workspace of a full recompute)"""
    weight_bytes_unsharded: int
    """this layer's weights on one TP rank before ZeRO-3 sharding (ZeRO-3 gather buffer)"""

    @property
    def per_microbatch_s(self) -> float:
        return self.compute_s + self.recompute_s + self.tp_comm_s


# --------------------------------------------------------------------------------------------
# communication groups and where they run
# --------------------------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def spans_nodes(dp: int, tp: int, pp: int, devices_per_node: int, num_nodes: int) -> tuple[bool, bool, bool]:
    """Whether any (tp, dp, pp) group crosses a node boundary, for the rank order
    rank = (pp_i * dp + dp_i) * tp + tp_i (tp innermost, so it gets the fastest links).

    Arithmetic, not an enumeration of the groups (16,384 GPUs have 16,384 of each): every group is
    an arithmetic progression base + i*stride (i < size) and a rank's node r // D grows with r, so a
    group spans nodes iff its first and last rank differ in node, i.e. iff (size-1)*stride >= D or
    base mod D >= D - (size-1)*stride. Residues of the bases repeat within D steps, so at most D^2
    bases are looked at whatever the world size."""
    if num_nodes <= 1:
        return False, False, False
    D = devices_per_node
    tp_bases = (k * tp for k in range(min(dp * pp, D)))
    dp_bases = (p * dp * tp + t for p in range(min(pp, D)) for t in range(min(tp, D)))
    pp_bases = (d * tp + t for d in range(min(dp, D)) for t in range(min(tp, D)))
    return (_progression_spans(tp_bases, 1, tp, D), _progression_spans(dp_bases, tp, dp, D),
            _progression_spans(pp_bases, dp * tp, pp, D))


def _progression_spans(bases, stride: int, size: int, per_node: int) -> bool:
    """Whether some group {base + i*stride : i < size} holds ranks of two nodes."""
    if size <= 1:
        return False
    reach = (size - 1) * stride
    return reach >= per_node or any(b % per_node >= per_node - reach for b in bases)


def collective_s(cluster: ClusterProfile, op: str, full_bytes: float, group: int, cross: bool) -> float:
    """Time of one collective whose full (unsharded) buffer is ``full_bytes``: the tensor for
    all-reduce, the gathered output for all-gather, the input for reduce-scatter (the size
    convention of the cluster profile's fits)."""
    if group <= 1 or full_bytes <= 0:
        return 0.0
    return cluster.collective_time_s(op, full_bytes, group, cross)


# --------------------------------------------------------------------------------------------
# per-layer coefficients
# --------------------------------------------------------------------------------------------

def _block_fractions(profile: ModelProfile) -> tuple[float, float, float]:
    """(attention-score share of block activations, share not divided by TP without SP,
    attention-core share of block forward FLOPs), from the shape (Korthikanti et al. 2022):
    activations s*b*h*(34 + 5*a*s/h) of which 10*s*b*h stay whole under TP without SP and
    5*a*s^2*b are the attention scores that selective recomputation drops; forward FLOPs
    24*b*s*h^2 + 4*b*s^2*h of which the second term is the attention core."""
    sh = profile.shape or {}
    h, a, s = sh.get("hidden"), sh.get("heads"), profile.seq_len
    if not h or not a:
        return 0.0, 10.0 / 34.0, 0.0
    total = 34.0 + 5.0 * a * s / h
    return (5.0 * a * s / h) / total, 10.0 / total, s / (6.0 * h + s)


def layer_costs(profile: ModelProfile, cluster: ClusterProfile, layout: Layout,
                train: TrainingConfig, recompute: str | None = None) -> dict[str, LayerCost]:
    """Coefficients of every layer for the outer part of ``layout`` (stages are ignored), every
    layer recomputed with ``recompute`` (default: ``layout.recompute``; per-layer overrides in
    ``layout.recompute_layers`` are applied by :func:`costs_for_layout`)."""
    mode = recompute or layout.recompute
    dp, tp, pp, mbs = layout.dp, layout.tp, layout.pp, layout.mbs
    tp_x, dp_x, pp_x = spans_nodes(dp, tp, pp, cluster.devices_per_node, cluster.num_nodes)
    w_b, g_b, o_b = train.state_bytes_per_param()
    ddp, fsdp = data_parallel_wrapper(layout)
    accumulate = layout.num_microbatches > 1
    prec_b = BYTES_PER_ELEMENT[train.precision]
    act_scale = prec_b / BYTES_PER_ELEMENT.get(profile.precision, 4)
    score_frac, unsharded_frac, attn_flop_frac = _block_fractions(profile)
    by_kind: dict[str, LayerCost] = {}
    for kind_name, kind in profile.kinds.items():
        shard = tp if kind.tp_shardable else 1
        t = kind.timing(mbs, shard)
        t1 = kind.timing(mbs, 1)
        fwd, bwd = t.forward_s, t.backward_s
        full_act = t1.saved_activation_bytes * act_scale
        out_b = t.output_bytes * act_scale
        is_block = kind.tp_shardable   # recomputation applies to the transformer blocks
        # activations per micro-batch on one TP rank
        if shard > 1 and not layout.sp:
            act = full_act * (unsharded_frac + (1 - unsharded_frac) / shard)
        else:
            act = full_act / shard
        recompute = 0.0
        if mode == "selective" and is_block:
            act *= (1 - score_frac)
            recompute = fwd * attn_flop_frac
        elif mode == "full" and is_block:
            act = out_b / (shard if layout.sp else 1)   # keep only the block input
            recompute = fwd
        # Megatron TP: two all-reduces of the block output in forward and two in backward; with
        # SP each becomes an all-gather before and a reduce-scatter after a sublayer (same bytes,
        # twice the calls, which matters where latency dominates). Full recompute repeats forward.
        tp_comm = 0.0
        if shard > 1:
            n = 4 + (2 if mode == "full" and is_block else 0)
            if layout.sp:
                tp_comm = n * (collective_s(cluster, "all_gather", out_b, tp, tp_x)
                               + collective_s(cluster, "reduce_scatter", out_b, tp, tp_x))
            else:
                tp_comm = n * collective_s(cluster, "all_reduce", out_b, tp, tp_x)
        p2p = 2 * cluster.collective_time_s("send_recv", out_b, 2, pp_x) if pp > 1 else 0.0
        params = kind.param_count / shard
        grad_bytes = params * g_b
        weight_bytes = params * w_b
        if ddp and params > 0:
            dp_sync = ddp_sync_s(cluster, layout, params, grad_bytes, weight_bytes, _width(profile, params), dp_x)
        elif fsdp and params > 0:
            gathers = 2 * layout.num_microbatches if layout.zero == 3 else 1
            dp_sync = (gathers * collective_s(cluster, "all_gather", weight_bytes, dp, dp_x)
                       + collective_s(cluster, "reduce_scatter", grad_bytes, dp, dp_x))
        else:
            dp_sync = 0.0
        opt_rate = profile.optimizer_step_s_per_param
        if train.optimizer == "sgd" and profile.optimizer_step_s_per_param_sgd > 0:
            opt_rate = profile.optimizer_step_s_per_param_sgd
        optimizer = opt_rate * params / (dp if fsdp else 1)
        if ddp:
            static = params * (w_b + 2 * g_b + o_b)
        elif fsdp:
            static = params * ((w_b + g_b + o_b) / dp + (w_b if layout.zero < 3 else 0) + (g_b if accumulate else 0))
        else:
            static = params * (w_b + g_b + o_b)
        cal = cluster.calibration
        # layers are profiled alone; in training every device computes at once
        slow = cluster.device.compute_slowdown if profile.source == "measured" else 1.0
        by_kind[kind_name] = LayerCost(
            compute_s=(fwd + bwd) * slow * cal.compute_scale, recompute_s=recompute * slow * cal.compute_scale,
            tp_comm_s=tp_comm * cal.tp_comm_scale, p2p_s=p2p * cal.comm_scale,
            dp_sync_s=dp_sync * cal.comm_scale, optimizer_s=optimizer * slow * cal.compute_scale, static_bytes=int(math.ceil(static)),
            act_bytes=int(math.ceil(act)), out_bytes=int(math.ceil(out_b)),
            full_act_bytes=int(math.ceil(full_act / shard)), weight_bytes_unsharded=int(math.ceil(weight_bytes)))
    return {info.name: by_kind[info.kind] for info in profile.layers}


def inflight_microbatches(layout: Layout, rank: int) -> float:
    """Micro-batches whose activations pipeline rank ``rank`` holds at its peak."""
    m, p, v = layout.num_microbatches, layout.pp, layout.vp
    if p == 1:
        return 1.0
    if layout.schedule == "gpipe":
        return float(m)
    if layout.schedule == "interleaved":
        # torch's ScheduleInterleaved1F1B warms up with (v-1)*per_round + 2*(p-1-rank) chunk forwards
        # before its first backward; each holds one chunk's activations (1/v of the rank's layers).
        # On rank 0 this is DESIGN.md's 1 + (p-1)/(p*v) times 1F1B's p; later ranks hold relatively more.
        per_round = m // max(1, m // p)
        warmup = min(m * v, (v - 1) * per_round + 2 * (p - 1 - rank))
        return min(float(m), (warmup + 1) / v)
    return float(min(m, p - rank))


def _width(profile: ModelProfile, params: float) -> float:
    """The model width h (a layer's matrices are treated as h x params/h for PowerSGD)."""
    h = (profile.shape or {}).get("hidden")
    return float(h) if h else math.sqrt(max(params, 1.0))


def ddp_sync_s(cluster: ClusterProfile, layout: Layout, params: float, grad_bytes: float, weight_bytes: float,
               width: float, cross: bool) -> float:
    """DDP's per-step synchronisation of one layer, with the opt-in lossy options:

    - exact: one all-reduce of the gradients;
    - fp16 compression: the all-reduce moves 2 bytes per parameter;
    - PowerSGD rank r (matrix h x n, n = params/h): all-reduces of P (h x r) and Q (n x r) in fp32,
      plus its matmuls (about 8*r*params FLOPs) at the device's rate;
    - local SGD every H steps: an all-reduce of the weights, once per H steps.
    """
    g = layout.dp
    if layout.sync_every > 1:
        return collective_s(cluster, "all_reduce", weight_bytes, g, cross) / layout.sync_every
    if layout.grad_compression == "fp16":
        return collective_s(cluster, "all_reduce", 2.0 * params, g, cross)
    if layout.grad_compression == "powersgd":
        r = POWERSGD_RANK
        n = params / width
        comm = (collective_s(cluster, "all_reduce", 4.0 * width * r, g, cross)
                + collective_s(cluster, "all_reduce", 4.0 * n * r, g, cross))
        return comm + 8.0 * r * params / cluster.device.compute_flops_per_s
    return collective_s(cluster, "all_reduce", grad_bytes, g, cross)


def data_parallel_wrapper(layout: Layout) -> tuple[bool, bool]:
    """(DDP, FSDP): the wrapper the executor uses (mirrors :func:`autoplan.execute.dp.use_ddp`)."""
    if layout.dp == 1:
        return False, False
    ddp = layout.zero == 0 and layout.tp == 1 and layout.pp == 1
    return ddp, not ddp


def transient_bytes(costs: dict[str, LayerCost], layout: Layout) -> int:
    """Per-device workspace independent of placement: the ZeRO-3 gather buffer (two layers'
    weights, for prefetch), one layer's unsharded gradient before its reduce-scatter (FSDP without
    accumulation), and the full-recompute workspace (one layer's activations)."""
    extra = 0
    _, fsdp = data_parallel_wrapper(layout)
    if fsdp and layout.zero == 3:
        extra += 2 * max(c.weight_bytes_unsharded for c in costs.values())
    if fsdp and layout.num_microbatches == 1:
        extra += max(c.weight_bytes_unsharded for c in costs.values())   # gradient bytes ~ weight bytes
    if layout.recompute == "full" or "full" in layout.recompute_layers.values():
        extra += max(c.full_act_bytes for c in costs.values())
    # backward holds the gradient of a layer's output while it computes the layer's input
    # gradient: the largest output (the logits) bounds that
    extra += max(c.out_bytes for c in costs.values())
    return extra





# --------------------------------------------------------------------------------------------
# evaluating a complete layout (what `estimate` prints and what the ILP must reproduce)
# --------------------------------------------------------------------------------------------

def check_stages(profile: ModelProfile, layout: Layout) -> None:
    """Stages must list every layer once, be non-empty and respect the graph's edges."""
    names = profile.layer_names()
    flat = [n for st in layout.stages for n in st]
    if sorted(flat) != sorted(names) or len(flat) != len(names):
        raise InputError("layout stages must list every layer of the model exactly once")
    if any(not st for st in layout.stages):
        raise InputError("layout has an empty pipeline stage")
    where = {n: j for j, st in enumerate(layout.stages) for n in st}
    for u, v in profile.edges:
        if where[u] > where[v]:
            raise InputError(f"layout places {v!r} on an earlier stage than its input {u!r}")


def boundary_crossings(edges: list[tuple[str, str]], stages: list[list[str]]) -> list[list[tuple[str, str]]]:
    """For each boundary b (between chunk b and b+1), the edges that cross it. An edge from chunk
    i to chunk k > i crosses boundaries i .. k-1 (its tensor is passed along stage by stage)."""
    where = {n: j for j, st in enumerate(stages) for n in st}
    out: list[list[tuple[str, str]]] = [[] for _ in range(max(0, len(stages) - 1))]
    for u, w in edges:
        for b in range(where[u], where[w]):
            out[b].append((u, w))
    return out


def costs_for_layout(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, train: TrainingConfig,
                     costs: dict[str, LayerCost] | None = None) -> dict[str, LayerCost]:
    """Per-layer coefficients with each layer's own recompute mode (``layout.recompute_layers``)."""
    costs = costs or layer_costs(profile, cluster, layout, train)
    if not layout.recompute_layers:
        return costs
    by_mode = {m: layer_costs(profile, cluster, layout, train, recompute=m)
               for m in set(layout.recompute_layers.values()) - {layout.recompute}}
    by_mode[layout.recompute] = costs
    return {n: by_mode[layout.recompute_of(n)][n] for n in costs}


def evaluate(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, train: TrainingConfig,
             costs: dict[str, LayerCost] | None = None) -> Prediction:
    """Predicted step time and memory of a complete layout (stages given). ``costs``, if given,
    are :func:`layer_costs` for ``layout`` (per-layer recompute overrides are added here)."""
    check_stages(profile, layout)
    costs = costs_for_layout(profile, cluster, layout, train, costs)
    p, v, m = layout.pp, layout.vp, layout.num_microbatches
    tau = [0.0] * p
    comp = [0.0] * p
    reco = [0.0] * p
    tpc = [0.0] * p
    p2p = [0.0] * p
    dps = [0.0] * p
    opt = [0.0] * p
    static = [0] * p
    act = [0] * p
    buf = [0] * p
    for j, st in enumerate(layout.stages):
        r = j % p
        for n in st:
            c = costs[n]
            comp[r] += c.compute_s
            reco[r] += c.recompute_s
            tpc[r] += c.tp_comm_s
            dps[r] += c.dp_sync_s
            opt[r] += c.optimizer_s
            static[r] += c.static_bytes
            act[r] += c.act_bytes
    # every edge that crosses a chunk boundary b costs a send/recv on the sending chunk and
    # occupies a buffer on both sides, once per boundary it crosses
    for b, edges in enumerate(boundary_crossings(profile.edges, layout.stages)):
        for u, _ in edges:
            c = costs[u]
            p2p[b % p] += c.p2p_s
            buf[b % p] += c.out_bytes
            buf[(b + 1) % p] += c.out_bytes
    for r in range(p):
        tau[r] = comp[r] + reco[r] + tpc[r] + p2p[r]
    rb = max(range(p), key=lambda r: (tau[r], -r))
    t_max = tau[rb]
    bubble = (sum(tau) - t_max) / v
    dp_sync = max(dps)
    optimizer = max(opt)
    overhead = cluster.calibration.step_overhead_s
    step = m * t_max + bubble + dp_sync + optimizer + overhead
    extra = transient_bytes(costs, layout) + cluster.calibration.memory_overhead_bytes
    mem_f = [static[r] + inflight_microbatches(layout, r) * act[r] + buf[r] + extra for r in range(p)]
    mem = [int(math.ceil(x)) for x in mem_f]
    peak_r = max(range(p), key=lambda r: mem_f[r])
    breakdown = {
        "compute": m * comp[rb], "recompute": m * reco[rb], "tp_comm": m * tpc[rb], "pp_p2p": m * p2p[rb],
        "bubble": bubble, "dp_sync": dp_sync, "optimizer": optimizer, "overhead": overhead,
    }
    memory_breakdown = {
        "params_grads_optimizer": static[peak_r],
        "activations": int(math.ceil(inflight_microbatches(layout, peak_r) * act[peak_r])),
        "pipeline_buffers": buf[peak_r], "workspace": extra,
    }
    fits = max(mem_f) <= cluster.device.memory_bytes * (1 + 1e-9)
    return Prediction(step_time_s=step, peak_memory_bytes=max(mem), breakdown_s=breakdown,
                      memory_per_stage_bytes=mem, memory_breakdown_bytes=memory_breakdown, fits=fits,
                      throughput_samples_per_s=train.global_batch / step if step > 0 else 0.0)
