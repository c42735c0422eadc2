"""The cost model: predicted step time and per-device memory of a layout, term by term.

Everything the solver optimises comes from here, so ``estimate`` and ``solve`` agree by
construction. For a fixed *outer* layout (dp, tp, pp, vp, mbs, m, zero, recompute, schedule, sp)
every quantity is a sum over layers of a per-layer coefficient (:class:`LayerCost`), which is what
lets the placement of layers on stages be an ILP (``ilp.py``).

Step time (seconds), with S = pp*vp chunks, chunk j on pipeline rank j mod pp, m micro-batches::

    c_l      = fwd_l + bwd_l + recompute_l + tp_comm_l          per micro-batch, layer l
    C_j      = sum_{l in j} c_l + p2p out of j                   chunk j, per micro-batch
    tau_r    = sum_{chunks j of rank r} C_j
    pipeline = m * tau_max            (the bottleneck rank's steady state: compute, tp_comm, p2p)
               + bubble               (fill and drain)
    bubble   = sum_r tau_r - tau_max                          vp = 1 (GPipe, 1F1B)
             = (pp - 1) * max_j C_j                           vp > 1 (interleaved 1F1B)
    step     = pipeline + max_r dp_sync_r + max_r optimizer_r + overhead

``overhead`` and the scale factors on compute and communication coefficients come from the
cluster profile's calibration (``validate --calibrate``); uncalibrated they are 0 and 1.

Where the coefficients come from, per layer kind, best first:

- **measured inside real groups** (``autoplan profile model --nproc N``,
  :mod:`autoplan.execute.group_profile`) for a cluster of N devices on one node: forward+backward
  with every device working at once, TP blocks through the executor's DTensor plan with their
  collectives (``compute`` = the unsharded in-group time / t, ``tp_comm`` = the rest: collectives,
  waits for the slowest rank, DTensor's per-op work), ZeRO-3 blocks through FSDP2 (``dp_sync`` =
  the extra all-gather and reduce-scatter time with copy-in/out), the optimizer step on the
  parameters as wrapped;
- **sum of parts** otherwise: one rank's compute measured alone (times the shared-device slowdown
  the cluster profile measured) or derived analytically, and alpha-beta fits of isolated
  collectives for TP, DP and pipeline communication (other group sizes, other nodes, catalogue
  hardware).

Software stack (analytic profiles only).  A profile derived for hardware one does not have
(``profile/analytic.py``) names the training software it assumes (``profile/assumptions.py``:
``STACKS``, autoplan's own executor by default; ``TrainingConfig.stack`` overrides it).  Its fields
change these terms, and only for such profiles (a measured profile keeps the fully exposed model)::

    activations   the stack's terms (no dropout masks, no scores under flash attention, SwiGLU)
    sp            compute -= the residual-stream kernels sequence parallel splits by tp
    selective     recompute = the profile's attention-core forward (0 under flash attention)
    vocab_parallel  embed/head split by tp: one all-reduce of the hidden state (SP: gather/scatter)
    tp_overlap    tp_comm = max(tp_comm / tp, tp_comm - compute)
    pp_scatter_gather  send out/tp, all-gather it over the TP group on arrival (not with SP)
    pp_overlap    p2p = 0
    dp_overlap    each layer's collective hides behind that layer's compute of one micro-batch:
                  exposed = max(0, collective - window); gradient reduction behind the backward,
                  parameter gathers (ZeRO-3 every micro-batch, ZeRO-1/2 after the step) behind the forward
    fsdp_sync_every_microbatch  reduce-scatter every micro-batch, no whole gradients kept
    DP groups spanning nodes with k ranks per node (catalogue clusters) run hierarchically:
                  ``hardware.hierarchical_collective_s`` (every GPU's own NIC carries 1/k of the data)

For vp = 1 this is the classic (m-1)*max + sum, i.e. the (p-1)/m bubble of GPipe/1F1B for balanced
stages; with balanced chunks interleaving divides the bubble by vp (each chunk is tau/vp), and
otherwise the slowest chunk paces the fill and drain (:func:`pipeline_s`). For measured profiles data-parallel gradient
synchronisation and the optimizer step are counted as exposed (not overlapped with backward): a
conservative model that calibration (``validate --calibrate``) can correct; analytic profiles
follow their software stack (below).

Memory (bytes) of a device of pipeline rank r, following what the executor runs
(:mod:`autoplan.execute.dp`: DDP for ZeRO-0 without TP or PP, FSDP2 ``fully_shard`` otherwise),
with P_l the parameters of layer l on one device (divided by tp for tensor-parallel layers),
w, g, o the weight, gradient and optimizer-state bytes per parameter (:meth:`TrainingConfig.state_bytes_per_param`:
4, 4, 8 for AdamW in autoplan's executor, which keeps fp32 parameters and gradients in mixed
precision too) and c the bytes of the weights the layers compute with (2 in bf16/fp16 mixed
precision, else 4)::

    static_l = P_l * (w + g + o + c [mixed])                            dp = 1
             = P_l * (w + 2g + o + c [mixed])     DDP: gradients are copied into its buckets
             = P_l * ((w + g + o)/dp              FSDP: sharded parameters, gradients, state
                      + c [zero < 3]              the gathered weights, kept from forward to backward
                      + g [m > 1])                unsharded gradients accumulated over micro-batches
                                                  (FSDP2 accumulates them in fp32, its reduce dtype)
    acts     = max over the rank's peak moments of sum_i n_i * act(chunk i)   (act after TP/SP and
               recomputation; n_i micro-batches of local chunk i in flight, :func:`inflight_vectors`:
               1 without PP, m for GPipe, min(m, pp-r) for 1F1B, torch's order for interleaved)
    buffers  = boundary tensors received and sent: one per micro-batch on each side of a cut, as
               torch.distributed.pipelining allocates them (``LayerCost.buffer_bytes``; the executor
               asks the schedule not to keep the last stage's outputs: ``step(..., return_outputs=False)``)
    workspace= ZeRO-3: two layers' gathered weights; FSDP without accumulation: one layer's unsharded
               gradient before its reduce-scatter; full recompute: one layer's activations; and the
               gradient of the largest layer output (the logits) during backward

``c [mixed]`` without FSDP is autocast's cache in autoplan's executor: the 16-bit copy of every
weight, made at its first use in a step and held until the step's autocast context ends.

In autoplan's executor gradients exist from their layer's backward to the optimizer step (its scripts
zero them with ``set_to_none``). With one micro-batch, one pipeline stage and no DP wrapper (one
device, or pure TP) nothing else holds them while activations are alive: backward frees a layer's
activations as it makes its gradients, so a layer is counted at max(act_l, P_l * g) instead of both
(the ``activations`` term then holds the larger). Everywhere else gradients coexist with
activations (accumulation over micro-batches, 1F1B's interleaved backwards, DP's buckets and shards).
The peak of a device is the larger of the step's and the optimizer step's: the latter holds
parameters, gradients and state (sharded as above, DDP's buckets included) plus the optimizer's
temporaries: foreach AdamW (torch's default on CUDA) allocates one fp32 buffer per parameter for
sqrt(v); on CPU it runs tensor by tensor and the temporaries are negligible.

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
from autoplan.profile.assumptions import STACKS, SoftwareStack
from autoplan.profile.formats import ClusterProfile, ModelProfile

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class TrainingConfig:
    """What is being trained, apart from the layout."""

    global_batch: int
    """samples (sequences) per optimizer step"""
    precision: str = "fp32"
    """fp32, or bf16/fp16 mixed precision (16-bit compute; see :meth:`state_bytes_per_param`)"""
    optimizer: str = "adamw"
    """adamw (two fp32 moments) or sgd (no state)"""
    stack: SoftwareStack | None = None
    """the training software whose overlap and kernels an analytic profile assumes
    (``profile/assumptions.py``); None: the analytic profile's own stack (its environment), and for
    a measured profile the fully exposed model below (DP, TP and pipeline traffic not overlapped)"""

    def __post_init__(self) -> None:
        from autoplan.plan.plan import MAX_DEGREE
        if not isinstance(self.global_batch, int) or isinstance(self.global_batch, bool) \
                or not 1 <= self.global_batch <= MAX_DEGREE:
            raise InputError(f"global batch must be an integer from 1 to {MAX_DEGREE}, got {self.global_batch}")
        if self.precision not in BYTES_PER_ELEMENT:
            raise InputError(f"precision must be one of {'|'.join(BYTES_PER_ELEMENT)}, got {self.precision!r}")
        if self.optimizer not in ("adamw", "sgd"):
            raise InputError(f"optimizer must be adamw or sgd, got {self.optimizer!r}")

    @property
    def mixed(self) -> bool:
        """bf16/fp16 mixed precision"""
        return self.precision != "fp32"

    def state_bytes_per_param(self, executor: bool = True) -> tuple[int, int, int]:
        """(weight, gradient, optimizer-state) bytes per parameter.

        autoplan's executor (``executor``: measured profiles and the ``autoplan`` software stack)
        holds 4 + 4 + (8 for AdamW's two moments | 0 for SGD) in every precision: in mixed
        precision the parameters ARE the fp32 master weights (autocast, or FSDP2's
        ``MixedPrecisionPolicy`` over fp32 shards) and their gradients are fp32; the 16-bit weights
        are :meth:`compute_weight_bytes_per_param` on top (4 + 4 + 8 + 2 = the 18 bytes per
        parameter of mixed-precision Adam with fp32 gradients, DESIGN.md).
        Other stacks (16-bit weights and gradients, Megatron style): fp32 as above; mixed
        2 + 2 + (12: fp32 master + two moments | 4: fp32 master), the "16 bytes per parameter" rule."""
        if self.precision == "fp32" or executor:
            return 4, 4, (8 if self.optimizer == "adamw" else 0)
        return 2, 2, (12 if self.optimizer == "adamw" else 4)

    def compute_weight_bytes_per_param(self) -> int:
        """Bytes per parameter of the weights the layers compute with: the 16-bit copies of mixed
        precision (autocast's cache, FSDP2's gathered ``param_dtype`` parameters, or the 16-bit
        weights themselves), or fp32 weights."""
        return BYTES_PER_ELEMENT[self.precision]


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
    buffer_bytes: int = 0
    """pipeline receive buffers a cut after this layer holds on each side, per step: the
    activations on the receiving chunk and their gradients on the sending chunk.  autoplan's
    executor (torch.distributed.pipelining) allocates one of each per micro-batch when the
    schedule starts and keeps them (``PipelineStage``: ``args_recv_info`` / ``grad_recv_info`` per
    micro-batch), so ``out_bytes * num_microbatches``; stacks that receive into one buffer at a
    time (Megatron's p2p): ``out_bytes``"""
    optimizer_phase_bytes: int = 0
    """what this layer holds on one device during the optimizer step, when activations and
    autocast's weight copies are gone: parameters, gradients, optimizer state and the optimizer's
    temporaries (foreach AdamW's sqrt(v) buffer on CUDA)"""

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


VOCAB_KINDS = ("embed", "head")
"""layer kinds a vocabulary-parallel stack splits over TP (not transformer blocks: never recomputed)"""


def software_stack(profile: ModelProfile, train: TrainingConfig) -> SoftwareStack | None:
    """The stack the costs assume: the training config's, else an analytic profile's own; None for
    measured profiles (whose costs keep the fully exposed model)."""
    if train.stack is not None:
        return train.stack
    if profile.source == "analytic":
        return STACKS.get(str(profile.environment.get("software_stack", "")))
    return None


def group_ranks_per_node(stride: int, size: int, devices_per_node: int) -> int:
    """How many members of a group of ``size`` ranks spaced ``stride`` apart share one node
    (rank order (pp, dp, tp), tp innermost: a DP group's stride is tp)."""
    if stride >= devices_per_node or devices_per_node % stride:
        return 1
    return max(1, min(size, devices_per_node // stride))


def _exposed(comm_s: float, window_s: float, overlap: bool) -> float:
    """What a collective adds to the step when it may overlap ``window_s`` of compute."""
    return max(0.0, comm_s - window_s) if overlap else comm_s


def layer_costs(profile: ModelProfile, cluster: ClusterProfile, layout: Layout,
                train: TrainingConfig, recompute: str | None = None) -> dict[str, LayerCost]:
    """Coefficients of every layer for the outer part of ``layout`` (stages are ignored), every
    layer recomputed with ``recompute`` (default: ``layout.recompute``; per-layer overrides in
    ``layout.recompute_layers`` are applied by :func:`costs_for_layout`)."""
    mode = recompute or layout.recompute
    dp, tp, pp, mbs = layout.dp, layout.tp, layout.pp, layout.mbs
    tp_x, dp_x, pp_x = spans_nodes(dp, tp, pp, cluster.devices_per_node, cluster.num_nodes)
    ddp, fsdp = data_parallel_wrapper(layout)
    accumulate = layout.num_microbatches > 1
    prec_b = BYTES_PER_ELEMENT[train.precision]
    act_scale = prec_b / BYTES_PER_ELEMENT.get(profile.precision, 4)
    score_frac, unsharded_frac, attn_flop_frac = _block_fractions(profile)
    stack = software_stack(profile, train)
    executor = stack is None or stack.name == "autoplan"        # memory as autoplan's executor holds it
    w_b, g_b, o_b = train.state_bytes_per_param(executor)
    c_b = train.compute_weight_bytes_per_param()
    cast_b = c_b if executor and train.mixed else 0               # autocast's 16-bit weight copies (no FSDP)
    grads_replace_acts = executor and dp == 1 and pp == 1 and not accumulate     # module docstring
    opt_temp_b = 4 if executor and train.optimizer == "adamw" and cluster.device.type == "cuda" else 0
    parts = _activation_parts(profile, stack)
    k_dp = group_ranks_per_node(tp, dp, cluster.devices_per_node)

    def dp_collective(op: str, nbytes: float) -> float:
        if stack is not None and dp_x and cluster.source == "catalogue" and k_dp > 1:
            from autoplan.profile.hardware import hierarchical_collective_s
            return hierarchical_collective_s(cluster, op, nbytes, dp, k_dp)
        return collective_s(cluster, op, nbytes, dp, dp_x)

    by_kind: dict[str, LayerCost] = {}
    world = in_group_world(profile, cluster)
    f_compute, f_optimizer = composition_factors(profile, world, mbs) if world else (1.0, 1.0)
    for kind_name, kind in profile.kinds.items():
        shard = tp if kind.tp_shardable else 1
        t = kind.timing(mbs, shard)
        t1 = kind.timing(mbs, 1)
        fwd, bwd = t.forward_s, t.backward_s
        full_act = t1.saved_activation_bytes * act_scale
        out_b = t.output_bytes * act_scale
        # recomputation applies to the transformer blocks (not a vocab-parallel embedding or head)
        is_block = kind.tp_shardable and not (stack is not None and kind_name in VOCAB_KINDS)
        # activations per micro-batch on one TP rank
        if stack is not None and is_block and parts is not None:
            whole, split, scores = parts
            tokens_16bit = profile.seq_len * mbs * prec_b / 2
            act = tokens_16bit * (whole / (shard if layout.sp else 1) + split / shard + scores / shard)
            full_act = tokens_16bit * (whole + split + scores)
            score_frac = scores / (whole + split + scores)
        elif stack is not None and not is_block:
            act = t.saved_activation_bytes * act_scale
        elif shard > 1 and not layout.sp:
            act = full_act * (unsharded_frac + (1 - unsharded_frac) / shard)
        else:
            act = full_act / shard
        if mode == "selective" and is_block:
            if t1.saved_activation_bytes_selective is not None and t1.saved_activation_bytes > 0:
                # measured with the executor's own selective wrapper (profile/layers.py)
                act *= t1.saved_activation_bytes_selective / t1.saved_activation_bytes
            else:     # from the shape: the attention scores dropped
                act *= (1 - score_frac)
        elif mode == "full" and is_block:
            act = out_b / (shard if layout.sp else 1)   # keep only the block input
        measured = _in_group_terms(kind, layout, mbs, shard, world, mode if is_block else "none",
                                   attn_flop_frac, train.optimizer) if world else None
        if measured is not None:
            compute, recompute, tp_comm, optimizer = measured
            compute, recompute, optimizer = compute * f_compute, recompute * f_compute, optimizer * f_optimizer
            slow = 1.0      # measured with every device working at once
            if fsdp:
                optimizer /= dp      # unless measured under FSDP (below): the step over this rank's shard
        else:
            if stack is not None:
                compute, recompute, tp_comm = _stack_terms(profile, cluster, layout, stack, kind_name, t, out_b,
                                                           shard, tp_x, mode if is_block else "none", is_block,
                                                           prec_b)
            else:
                compute, recompute, tp_comm = _sum_of_parts(cluster, layout, fwd, bwd, out_b, shard, tp_x,
                                                            mode if is_block else "none", attn_flop_frac,
                                                            t.selective_recompute_s)
            opt_rate = profile.optimizer_step_s_per_param
            if train.optimizer == "sgd" and profile.optimizer_step_s_per_param_sgd > 0:
                opt_rate = profile.optimizer_step_s_per_param_sgd
            optimizer = opt_rate * kind.param_count / shard / (dp if fsdp else 1)
            # layers are profiled alone; in training every device computes at once
            slow = cluster.device.compute_slowdown if profile.source == "measured" else 1.0
        p2p = 0.0
        if pp > 1:
            send_b = out_b
            gather = 0.0
            if stack is not None and stack.pp_scatter_gather and shard > 1 and kind_name != "head":
                # send 1/tp of the boundary tensor, all-gather it over NVLink on arrival (with
                # sequence parallel the next stage takes the slice as it is)
                send_b = out_b / shard
                gather = 0.0 if layout.sp else collective_s(cluster, "all_gather", out_b, tp, tp_x)
            p2p = 2 * (cluster.collective_time_s("send_recv", send_b, 2, pp_x) + gather)
            if stack is not None and stack.pp_overlap:
                p2p = 0.0
        params = kind.param_count / shard
        grad_bytes = params * g_b             # what DDP all-reduces, FSDP reduce-scatters (its reduce dtype)
        weight_bytes = params * c_b           # what FSDP gathers (param_dtype) and computes with
        overlap = stack is not None and stack.dp_overlap
        fsdp_measured = _in_group_fsdp_s(kind, layout, mbs, world) if (world and fsdp and params > 0) else None
        if ddp and params > 0:
            dp_sync = ddp_sync_s(cluster, layout, params, grad_bytes, params * w_b, _width(profile, params), dp_x)
            if not layout.lossy and stack is not None:
                dp_sync = _exposed(dp_collective("all_reduce", grad_bytes), bwd, overlap)
        elif fsdp_measured is not None:
            dp_sync, fsdp_adamw_s = fsdp_measured
            if train.optimizer == "adamw":
                optimizer = fsdp_adamw_s * f_optimizer
        elif fsdp and params > 0:
            ag = dp_collective("all_gather", weight_bytes)
            rs = dp_collective("reduce_scatter", grad_bytes)
            m = layout.num_microbatches
            if stack is None:
                gathers = 2 * m if layout.zero == 3 else 1
                dp_sync = gathers * ag + rs
            elif stack.fsdp_sync_every_microbatch:
                # every micro-batch's backward reduce-scatters its gradients (ZeRO-3: after
                # gathering the weights again); the weights are gathered before each forward
                # (ZeRO-3) or once, after the optimizer step
                bwd_ag = ag if layout.zero == 3 else 0.0
                fwd_ags = m if layout.zero == 3 else 1
                dp_sync = fwd_ags * _exposed(ag, fwd, overlap) + m * _exposed(bwd_ag + rs, bwd, overlap)
            elif layout.zero == 3:
                # gathered again before every micro-batch's forward and backward (prefetched while
                # the previous layer computes); gradients reduce-scattered after the last backward
                dp_sync = (m * _exposed(ag, fwd, overlap) + (m - 1) * _exposed(ag, bwd, overlap)
                           + _exposed(ag + rs, bwd, overlap))
            else:
                # gradients reduce-scattered during the last backward, updated weights gathered
                # ahead of the first forward
                dp_sync = _exposed(rs, bwd, overlap) + _exposed(ag, fwd, overlap)
        else:
            dp_sync = 0.0
        if ddp:
            static = params * (w_b + 2 * g_b + o_b + cast_b)
            optimizer_phase = params * (w_b + 2 * g_b + o_b + opt_temp_b)
        elif fsdp:
            whole_grads = accumulate and not (stack is not None and stack.fsdp_sync_every_microbatch)
            static = params * ((w_b + g_b + o_b) / dp + (c_b if layout.zero < 3 else 0) + (g_b if whole_grads else 0))
            optimizer_phase = params * (w_b + g_b + o_b + opt_temp_b) / dp
        else:
            static = params * (w_b + g_b + o_b + cast_b)
            optimizer_phase = params * (w_b + g_b + o_b + opt_temp_b)
        if grads_replace_acts:
            static -= grad_bytes
            act = max(act, grad_bytes)
        cal = cluster.calibration
        by_kind[kind_name] = LayerCost(
            compute_s=compute * slow * cal.compute_scale, recompute_s=recompute * slow * cal.compute_scale,
            tp_comm_s=tp_comm * cal.tp_scale(tp), p2p_s=p2p * cal.comm_scale,
            dp_sync_s=dp_sync * cal.dp_sync_scale, optimizer_s=optimizer * slow * cal.compute_scale,
            static_bytes=int(math.ceil(static)),
            act_bytes=int(math.ceil(act)), out_bytes=int(math.ceil(out_b)),
            buffer_bytes=int(math.ceil(out_b)) * (layout.num_microbatches if executor else 1),
            full_act_bytes=int(math.ceil(full_act / shard)), weight_bytes_unsharded=int(math.ceil(weight_bytes)),
            optimizer_phase_bytes=int(math.ceil(optimizer_phase)))
        _check_range(by_kind[kind_name], kind_name, layout)
    return {info.name: by_kind[info.kind] for info in profile.layers}


MAX_TERM_S = 1e9
"""a per-layer time past this (31 years) comes from figures out of range, not from a real layout"""


def _check_range(cost: LayerCost, kind: str, layout: Layout) -> None:
    """Refuse (InputError) per-layer times that are not finite or absurdly large: they come from a
    profile's figures out of range (a link of 1e-20 B/s, say), and solvers treat coefficients past
    1e20 as infinite, which breaks them instead of ranking the layout last."""
    for name in ("compute_s", "recompute_s", "tp_comm_s", "p2p_s", "dp_sync_s", "optimizer_s"):
        t = getattr(cost, name)
        if not (math.isfinite(t) and t <= MAX_TERM_S):
            raise InputError(f"layer kind {kind!r} would take {t:.3g} s of {name[:-2]} per step under "
                             f"{layout.short()}: "
                             "the model or cluster profile holds figures out of range")


def _activation_parts(profile: ModelProfile, stack: SoftwareStack | None) -> tuple[float, float, float] | None:
    """Per-token saved activations of a block under ``stack`` (analytic.block_activation_parts)."""
    if stack is None or not profile.shape:
        return None
    from autoplan.models.shapes import ModelShape
    from autoplan.profile.analytic import block_activation_parts
    return block_activation_parts(ModelShape.from_dict(profile.shape), profile.seq_len, stack)

def _stack_terms(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, stack: SoftwareStack, kind_name: str,
                 t, out_b: float, shard: int, tp_x: bool, mode: str, is_block: bool,
                 prec_b: int) -> tuple[float, float, float]:
    """(compute, recompute, tp_comm) per micro-batch of an analytic profile's layer under its software
    stack (module docstring, "Software stack"). ``t`` is the layer's timing at this TP degree.

    Blocks: Megatron TP's two all-reduces of the block output in forward and two in backward (SP:
    an all-gather and a reduce-scatter each; full recompute repeats the forward's two). A
    vocab-parallel embedding all-reduces (SP: reduce-scatters) its output in forward, a
    vocab-parallel head its input gradient in backward (SP: all-gather + reduce-scatter)."""
    tp = layout.tp
    compute = t.forward_s + t.backward_s
    if layout.sp and shard > 1 and is_block:
        compute -= t.sequence_parallel_saving_s
    recompute = t.selective_recompute_s if mode == "selective" else (t.forward_s if mode == "full" else 0.0)
    tp_comm = 0.0
    if shard > 1 and is_block:
        tp_comm = block_tp_comm_s(cluster, layout, out_b, tp_x, mode)
    elif shard > 1:
        hidden_b = profile.seq_len * layout.mbs * int((profile.shape or {}).get("hidden", 0)) * prec_b
        if kind_name == "head" and layout.sp:
            tp_comm = (collective_s(cluster, "all_gather", hidden_b, tp, tp_x)
                       + collective_s(cluster, "reduce_scatter", hidden_b, tp, tp_x))
        else:
            tp_comm = collective_s(cluster, "reduce_scatter" if layout.sp else "all_reduce", hidden_b, tp, tp_x)
    if stack.tp_overlap and tp_comm > 0:
        # collectives pipelined with the GEMMs that produce or consume them: the first of tp chunks
        # stays exposed, and whatever the compute cannot cover
        tp_comm = max(tp_comm / tp, tp_comm - compute)
    return compute, recompute, tp_comm


def _sum_of_parts(cluster: ClusterProfile, layout: Layout, fwd: float, bwd: float, out_b: float, shard: int,
                  tp_x: bool, mode: str, attn_flop_frac: float,
                  selective_s: float = 0.0) -> tuple[float, float, float]:
    """(compute, recompute, tp_comm) per micro-batch from one rank's compute measured alone and the
    alpha-beta fits of isolated collectives (the model for what was not measured in groups).

    Megatron TP: two all-reduces of the block output in forward and two in backward; with SP each
    becomes an all-gather before and a reduce-scatter after a sublayer (same bytes, twice the
    calls, which matters where latency dominates). Full recompute repeats the forward's two.
    Selective recompute costs ``selective_s`` where the profile measured it, else the attention
    core's share of the forward FLOPs."""
    recompute = 0.0
    if mode == "selective":
        recompute = selective_s if selective_s > 0 else fwd * attn_flop_frac
    elif mode == "full":
        recompute = fwd
    tp_comm = block_tp_comm_s(cluster, layout, out_b, tp_x, mode) if shard > 1 else 0.0
    return fwd + bwd, recompute, tp_comm


def block_tp_comm_s(cluster: ClusterProfile, layout: Layout, out_b: float, tp_x: bool, mode: str) -> float:
    """Megatron TP's collectives of one block per micro-batch: two all-reduces of the block output in
    forward and two in backward (SP: an all-gather before and a reduce-scatter after each sublayer);
    full recompute repeats the forward's two."""
    tp = layout.tp
    n = 4 + (2 if mode == "full" else 0)
    if layout.sp:
        return n * (collective_s(cluster, "all_gather", out_b, tp, tp_x)
                    + collective_s(cluster, "reduce_scatter", out_b, tp, tp_x))
    return n * collective_s(cluster, "all_reduce", out_b, tp, tp_x)


def in_group_world(profile: ModelProfile, cluster: ClusterProfile) -> int | None:
    """The world size whose in-group figures (``profile model --nproc``) cost layouts on ``cluster``:
    the cluster's own, when the profile measured it on the same kind of device; else None (sum of
    parts)."""
    world = cluster.world_size
    if profile.source != "measured" or cluster.num_nodes > 1:
        return None
    if profile.environment.get("device_type", cluster.device.type) != cluster.device.type:
        return None
    return world if any(world in k.group_worlds() for k in profile.kinds.values()) else None


def composition_factors(profile: ModelProfile, world: int, mbs: int) -> tuple[float, float]:
    """(compute, optimizer) factors by which the layers composed into the whole model run slower
    than the sum of each measured on its own, with ``world`` processes at once (both measured by
    ``profile model --nproc``; 1.0 where the whole model was not measured). On CPU they come from a
    working set larger than the caches and fresh activation memory every step (measured 1.2-1.3x
    for gpt-small's forward+backward on one process)."""
    whole = profile.whole_model_timing(mbs, world)
    if whole is None:
        return 1.0, 1.0
    parts = opt = 0.0
    for info in profile.layers:
        g = profile.kinds[info.kind].group_timing(mbs, world=world)
        if g is None:
            return 1.0, 1.0
        parts += g.forward_s + g.backward_s
        opt += g.optimizer_s
    f_c = (whole.forward_s + whole.backward_s) / parts if parts > 0 else 1.0
    f_o = whole.optimizer_s / opt if opt > 0 and whole.optimizer_s > 0 else 1.0
    return f_c, f_o


def _in_group_terms(kind, layout: Layout, mbs: int, shard: int, world: int, mode: str, attn_flop_frac: float,
                    optimizer: str) -> tuple[float, float, float, float] | None:
    """(compute, recompute, tp_comm, optimizer) of one layer from figures measured inside real
    groups of ``world`` processes working at once (:mod:`autoplan.execute.group_profile`), or None
    where that case was not measured.

    ``compute`` is the layer's in-group time on its own (TP degree 1) divided by the TP degree:
    the arithmetic a TP rank would do if sharding were free; ``tp_comm`` is the rest of the
    TP-sharded in-group time: collectives, their waits for the slowest rank, DTensor's per-op work
    and smaller, slower matrix products. Selective recompute repeats the attention core's share of
    that compute; full recompute the whole in-group forward, its collectives included."""
    base = kind.group_timing(mbs, world=world)
    if base is None:
        return None
    g = base if shard == 1 else kind.group_timing(mbs, world=world, tp=shard, sp=layout.sp)
    if g is None:
        return None
    total = g.forward_s + g.backward_s
    compute = min(total, (base.forward_s + base.backward_s) / shard)
    recompute = 0.0
    if mode == "selective":
        recompute = base.forward_s / shard * attn_flop_frac
    elif mode == "full":
        recompute = g.forward_s
    opt = g.optimizer_sgd_s if optimizer == "sgd" else g.optimizer_s
    return compute, recompute, total - compute, opt


def _in_group_fsdp_s(kind, layout: Layout, mbs: int, world: int) -> tuple[float, float] | None:
    """(dp_sync per step, AdamW step) of one layer under FSDP, from in-group figures of a ZeRO-3
    block over ``layout.dp`` ranks (TP degree 1 only), or None where not measured.

    Per micro-batch ZeRO-3 all-gathers the weights for forward and again for backward (with
    FSDP2's copy-in/out): the in-group forward+backward beyond the unwrapped layer's; the step's
    last backward also reduce-scatters: the synced backward beyond the unsynced one. ZeRO 0-2 keep
    the gathered weights from forward to backward: one all-gather (half the per-micro-batch extra)
    and one reduce-scatter per step."""
    if layout.tp > 1:
        return None
    base = kind.group_timing(mbs, world=world)
    z3 = kind.group_timing(mbs, world=world, dp=layout.dp)
    if base is None or z3 is None:
        return None
    gathers = max(0.0, z3.forward_s + z3.backward_s - base.forward_s - base.backward_s)
    reduce = max(0.0, z3.backward_sync_s - z3.backward_s)
    per_step = layout.num_microbatches * gathers if layout.zero == 3 else gathers / 2
    return per_step + reduce, z3.optimizer_s


def interleaved_order(pp: int, vp: int, m: int, rank: int) -> list[tuple[str, int]]:
    """The order in which torch's ``ScheduleInterleaved1F1B`` runs chunk forwards (``"F"``) and
    backwards (``"B"``) on pipeline rank ``rank``, as (kind, local chunk index) pairs.

    Mirrors torch 2.13's ``_get_warmup_ops`` / ``_get_1f1b_rank_ops``: micro-batches go in rounds
    of ``m // max(1, m // pp)``; rank r first runs ``(vp-1)*per_round + 2*(pp-1-r)`` forwards
    (at most m*vp), then one forward and one backward per step, then the remaining backwards.
    Forwards cycle through the local chunks a round at a time, backwards in reverse chunk order.
    (tests/test_cost_schedule.py checks it against torch's own ``pipeline_order``.)"""
    per_round = m // max(1, m // pp)
    warmup = min((vp - 1) * per_round + 2 * (pp - 1 - rank), m * vp)
    steady = m * vp - warmup

    def fwd(op: int) -> int:
        return (op // per_round) % vp

    def bwd(op: int) -> int:
        return vp - 1 - ((op - warmup) // per_round) % vp
    out: list[tuple[str, int]] = []
    for op in range(warmup + steady + warmup):
        if op < warmup + steady:
            out.append(("F", fwd(op)))
        if op >= warmup:
            out.append(("B", bwd(op)))
    return out


@lru_cache(maxsize=8192)
def inflight_vectors(schedule: str, pp: int, vp: int, m: int, rank: int) -> tuple[tuple[int, ...], ...]:
    """Micro-batches whose activations pipeline rank ``rank`` holds per local chunk (chunk
    ``rank + i*pp`` for i = 0..vp-1), at every moment that can be its memory peak (the vectors no
    other moment exceeds in every chunk). The rank's activation peak is the largest
    ``sum_i n_i * act(chunk i)`` over them::

        no PP           (1,)                   one micro-batch at a time (gradient accumulation)
        GPipe           (m,)                   every forward before the first backward
        1F1B            (min(m, pp - rank),)   Narayanan et al. 2021; torch's Schedule1F1B
        interleaved     simulated from torch's order (:func:`interleaved_order`): uneven chunks
                        matter, e.g. pp=4, vp=2, m=8: rank 1 holds all 8 micro-batches of its
                        first chunk while its second drains
    """
    if pp == 1:
        return ((1,),)
    if schedule == "gpipe":
        return ((m,) + (0,) * (vp - 1),)
    if schedule != "interleaved":
        return ((min(m, pp - rank),),)
    held = [0] * vp
    seen: list[tuple[int, ...]] = []
    for kind, i in interleaved_order(pp, vp, m, rank):
        held[i] += 1 if kind == "F" else -1
        if kind == "F":
            seen.append(tuple(held))
    keep = [v for v in set(seen)
            if not any(w != v and all(a >= b for a, b in zip(w, v)) for w in seen)]
    return tuple(sorted(keep))


def pipeline_s(tau: list[float], chunk_s: list[float], layout: Layout) -> float:
    """Time of the pipeline part of a step, from each rank's per-micro-batch time ``tau`` and each
    chunk's ``chunk_s`` (its layers plus the send after it)::

        GPipe, 1F1B    (m - 1) * max_r tau_r + sum_r tau_r       the fill and drain pass each stage once
        interleaved    m * max_r tau_r + (pp - 1) * max_j chunk_j

    With equal chunks both are the classic ``m*tau + (pp-1)*tau/vp``. Interleaved 1F1B fills and
    drains one chunk per step, so the slowest chunk paces the bubble, not the rank's average
    chunk. On torch's order (simulated by :mod:`autoplan.plan.timeline`, pp=2-8, vp=2-3, m=4-16)
    it is exact where every rank's larger chunks come at the same local index, where
    ``(sum tau - max tau)/vp`` is 3-4% short for chunks one block apart; 4% short where the ranks
    differ in which chunk is larger, and 10% short (the old form: 19%) for chunks of 1 block beside
    chunks of 5, where the steady state stalls too."""
    m, p, v = layout.num_microbatches, layout.pp, layout.vp
    t_max = max(tau)
    if v == 1:
        return (m - 1) * t_max + sum(tau)
    return m * t_max + (p - 1) * max(chunk_s)


def shared_device_relief(cluster: ClusterProfile, busy_s: list[float], pipeline_s: float) -> float:
    """Factor (<= 1) on a pipeline's compute and communication where devices share cores.

    Costs of a cluster whose processes share cores (``compute_slowdown`` s > 1: more processes
    than cores) are measured with every process busy. In a pipeline a rank waits for its
    neighbours in the fill, the drain and between micro-batches, and a waiting process leaves its
    core to the others: with a fraction u of the ranks busy on average (the ranks' work over the
    pipeline's length), each computes at s*u of its alone time instead of s (never faster than
    alone)::

        relief = max(1/s, min(1, u)),   u = sum_r busy_r / (pp * pipeline)

    1 without pipelining, and on devices that do not share (GPUs: s = 1)."""
    s = cluster.device.compute_slowdown
    if s <= 1.0 or len(busy_s) < 2 or pipeline_s <= 0:
        return 1.0
    u = sum(busy_s) / (len(busy_s) * pipeline_s)
    return max(1.0 / s, min(1.0, u))


def inflight_microbatches(layout: Layout, rank: int) -> float:
    """Micro-batches of activations pipeline rank ``rank`` holds at its peak when its layers are
    spread evenly over its chunks: the largest total of :func:`inflight_vectors` over vp
    (the tied placement ILP and the search's bounds use it; :func:`evaluate` uses the vectors)."""
    vecs = inflight_vectors(layout.schedule if layout.pp > 1 else "1f1b", layout.pp, layout.vp,
                            layout.num_microbatches, rank)
    return max(sum(v) for v in vecs) / layout.vp


def peak_activation_bytes(layout: Layout, rank: int, chunk_act_bytes: list[float]) -> float:
    """The activation peak of ``rank`` whose local chunks hold ``chunk_act_bytes`` per micro-batch."""
    vecs = inflight_vectors(layout.schedule if layout.pp > 1 else "1f1b", layout.pp, layout.vp,
                            layout.num_microbatches, rank)
    return max(sum(n * a for n, a in zip(v, chunk_act_bytes)) for v in vecs)


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
    accumulation), the new gradient of a layer that backward allocates before adding it to the
    accumulated one (gradient accumulation: the largest layer's, measured 12 MiB on an embedding of
    8192 x 384 in fp32), the full-recompute workspace (one layer's activations) and the selective
    one (the part of one layer's activations that its backward recomputes)."""
    extra = 0
    _, fsdp = data_parallel_wrapper(layout)
    if fsdp and layout.zero == 3:
        extra += 2 * max(c.weight_bytes_unsharded for c in costs.values())
    if fsdp or layout.num_microbatches > 1:
        extra += max(c.weight_bytes_unsharded for c in costs.values())   # gradient bytes ~ weight bytes
    if layout.recompute == "full" or "full" in layout.recompute_layers.values():
        extra += max(c.full_act_bytes for c in costs.values())
    recomputed = [max(0, c.full_act_bytes - c.act_bytes) for n, c in costs.items()
                  if layout.recompute_of(n) == "selective"]
    if recomputed:
        extra += max(recomputed)
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


def rank_buffer_bytes(crossings: list[list[tuple[str, str]]], costs: dict[str, LayerCost], pp: int) -> list[int]:
    """Pipeline receive buffers of each pipeline rank: every edge crossing boundary b (from
    :func:`boundary_crossings`) holds its ``buffer_bytes`` on the sending chunk's rank (gradients)
    and on the receiving chunk's rank (activations)."""
    buf = [0] * pp
    for b, edges in enumerate(crossings):
        for u, _ in edges:
            buf[b % pp] += costs[u].buffer_bytes
            buf[(b + 1) % pp] += costs[u].buffer_bytes
    return buf


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
    opt_phase = [0] * p
    act = [0] * p
    chunk_act = [[0.0] * v for _ in range(p)]
    chunk_s = [0.0] * (p * v)
    for j, st in enumerate(layout.stages):
        r = j % p
        for n in st:
            c = costs[n]
            chunk_s[j] += c.per_microbatch_s
            comp[r] += c.compute_s
            reco[r] += c.recompute_s
            tpc[r] += c.tp_comm_s
            dps[r] += c.dp_sync_s
            opt[r] += c.optimizer_s
            static[r] += c.static_bytes
            opt_phase[r] += c.optimizer_phase_bytes
            act[r] += c.act_bytes
            chunk_act[r][j // p] += c.act_bytes
    # every edge that crosses a chunk boundary b costs a send/recv on the sending chunk and
    # occupies a buffer on both sides, once per boundary it crosses
    crossings = boundary_crossings(profile.edges, layout.stages)
    for b, edges in enumerate(crossings):
        for u, _ in edges:
            p2p[b % p] += costs[u].p2p_s
            chunk_s[b] += costs[u].p2p_s
    buf = rank_buffer_bytes(crossings, costs, p)
    for r in range(p):
        tau[r] = comp[r] + reco[r] + tpc[r] + p2p[r]
    rb = max(range(p), key=lambda r: (tau[r], -r))
    t_max = tau[rb]
    bubble = max(0.0, pipeline_s(tau, chunk_s, layout) - m * t_max)   # rounding can make it -1e-17
    relief = shared_device_relief(cluster, [m * t for t in tau], m * t_max + bubble)
    comp, reco, tpc, p2p = ([x * relief for x in xs] for xs in (comp, reco, tpc, p2p))
    t_max, bubble = t_max * relief, bubble * relief
    dp_sync = max(dps)
    optimizer = max(opt)
    overhead = cluster.calibration.step_overhead_s
    step = m * t_max + bubble + dp_sync + optimizer + overhead
    extra = transient_bytes(costs, layout) + cluster.calibration.memory_overhead_bytes
    peak_act = [peak_activation_bytes(layout, r, chunk_act[r]) for r in range(p)]
    step_mem = [static[r] + peak_act[r] + buf[r] + extra for r in range(p)]
    opt_mem = [opt_phase[r] + cluster.calibration.memory_overhead_bytes for r in range(p)]
    mem_f = [max(a, b) for a, b in zip(step_mem, opt_mem)]
    mem = [int(math.ceil(x)) for x in mem_f]
    peak_r = max(range(p), key=lambda r: mem_f[r])
    breakdown = {
        "compute": m * comp[rb], "recompute": m * reco[rb], "tp_comm": m * tpc[rb], "pp_p2p": m * p2p[rb],
        "bubble": bubble, "dp_sync": dp_sync, "optimizer": optimizer, "overhead": overhead,
    }
    memory_breakdown = {
        "params_grads_optimizer": static[peak_r],
        "activations": int(math.ceil(peak_act[peak_r])),
        "pipeline_buffers": buf[peak_r], "workspace": extra,
        "optimizer_step_peak": int(math.ceil(opt_mem[peak_r])),   # the peak when above the others' sum
    }
    fits = max(mem_f) <= cluster.device.memory_bytes * (1 + 1e-9)
    return Prediction(step_time_s=step, peak_memory_bytes=max(mem), breakdown_s=breakdown,
                      memory_per_stage_bytes=mem, memory_breakdown_bytes=memory_breakdown, fits=fits,
                      throughput_samples_per_s=train.global_batch / step if step > 0 else 0.0)
