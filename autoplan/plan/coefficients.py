"""Per-layer coefficients of one outer layout (:class:`LayerCost`): time per micro-batch, time per
step and bytes held, layer by layer, so that the placement of layers on stages is an ILP.

:func:`layer_costs` works kind by kind (identical layers share one instance) in four parts, each a
function: activations (:func:`_activation_bytes`), time terms from the best source the profile has
(:mod:`autoplan.plan.coefficient_sources`), pipeline and data-parallel communication
(:func:`_p2p_s`, :func:`_data_parallel_terms`) and what one device holds of the layer's state
(:func:`_state_bytes`).  What the terms mean: :mod:`autoplan.plan.cost`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoplan.errors import InputError
from autoplan.plan.coefficient_sources import (composition_factors, cp_exchange_s, ddp_sync_s, exposed_s,
                                               in_group_cp_terms, in_group_ddp_s_per_param, in_group_fsdp_s, in_group_terms,
                                               in_group_world, matrix_width, overlap_interference, stack_terms,
                                               sum_of_parts_terms)
from autoplan.plan.groups import collective_s, data_parallel_wrapper, group_ranks_per_node, layout_spans
from autoplan.plan.pipeline_costs import extra_message_s, pipeline_costs_for
from autoplan.plan.plan import Layout
from autoplan.plan.training import TrainingConfig
from autoplan.profile.formats import BYTES_PER_ELEMENT
from autoplan.profile.assumptions import STACKS, SoftwareStack
from autoplan.profile.formats import ClusterProfile, ModelProfile, PipelineCosts, is_fp8


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
    cp_comm_s: float
    """context parallel's exposed key/value exchange (forward and backward)"""
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
    """pipeline receive buffers a cut after this layer holds on each side at a time: the
    activation on the receiving chunk and its gradient on the sending chunk, each from its receive
    until the backward that consumes it (Megatron's p2p; autoplan's executor since its receive
    buffers are allocated just in time, :mod:`autoplan.execute.pp_buffers`): what crosses the cut,
    one in transit per side (``out_bytes``; 1/tp of it where the stack sends a slice, Megatron's
    scatter/gather). A received activation that waits for its backward is the chunk's input,
    which its first layer saves (``act_bytes``), so it is not counted again"""
    held_out_bytes: int = 0
    """what a chunk whose output this layer makes keeps per in-flight micro-batch, beyond its
    activations: torch's ``PipelineStage`` keeps each micro-batch's output (``fwd_cache``) until
    its backward, so autoplan's executor holds ``out_bytes`` (the sent tensor; on the last stage the
    logits); Megatron frees a sent output's storage after the send (``deallocate_output_tensor``): 0"""
    backward_transient_bytes: int = 0
    """the most the layer's backward holds at once beyond its saved activations (0: ``out_bytes``,
    its output's gradient). The layer whose output is autoplan's executor's loss input (the logits
    into ``token_cross_entropy``: cross entropy in fp32) holds two fp32 logit-sized tensors at the
    loss's backward: the gradient of the log-probabilities (``nll_loss``) and of the logits
    (``log_softmax``), 8 bytes per logit (measured with the live-tensor tracker:
    tests/test_profile_layers.py)"""
    fp8_workspace_bytes: int = 0
    """fp8 training: the layer's weights cast to fp8 and transposed, made when the layer runs
    (``TrainingConfig.fp8_weight_bytes_per_param`` per parameter; one layer's at a time)"""
    optimizer_phase_bytes: int = 0
    """what this layer holds on one device during the optimizer step, when activations and
    autocast's weight copies are gone: parameters, gradients, optimizer state and the optimizer's
    temporaries (foreach AdamW's sqrt(v) buffer on CUDA)"""
    optimizer_transient_bytes: int = 0
    """what the optimizer step holds for this layer at a time beyond ``optimizer_phase_bytes``:
    AdamW tensor by tensor (torch's single-tensor path, the default on CPU) makes sqrt(v) and its
    quotient, two temporaries of the largest parameter tensor's size (its local shard under TP and
    FSDP): the embedding's and head's whole weight, a block's largest matrix (hidden x ffn_hidden
    from the shape, else the block's parameters). The device holds one layer's at a time, the
    largest (``cost.evaluate``); 0 on CUDA, where foreach AdamW's buffer is in ``optimizer_phase_bytes``"""
    late_grad_bytes: int = 0
    """the part of ``static_bytes`` that is gradients the step's first backward of the layer makes:
    autoplan's executor sets gradients to None after the optimizer step
    (``zero_grad(set_to_none=True)``; FSDP2's accumulated and sharded gradients are made by backward
    too), so a rank's moments before a chunk's first backward (the warm-up's forwards; without a
    pipeline, the end of a step's only forward) are without them
    (:func:`autoplan.plan.schedules.peak_moments`). DDP's buckets are not among them: DDP allocates
    them when it wraps the model. 0 where ``grads_replace_acts`` (``static_bytes`` holds no
    gradients then) and for other stacks: Megatron's contiguous gradient buffer and DeepSpeed's
    exist from the start"""
    fsdp_unit: str = ""
    """under autoplan's executor at ZeRO-3 (FSDP2 ``fully_shard`` with resharding,
    :mod:`autoplan.execute.dp`), the unit whose parameters are gathered together: "block" (each
    transformer block is its own unit) or "root" (the layers that are not blocks, embedding and
    head, are one unit per pipeline chunk: its module's own); "" otherwise. The workspace follows
    the units (:func:`autoplan.plan.memory.transient_bytes`, :func:`autoplan.plan.memory.rank_backward_end_bytes`)"""

    @property
    def per_microbatch_s(self) -> float:
        return self.compute_s + self.recompute_s + self.tp_comm_s + self.cp_comm_s


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


@dataclass(frozen=True)
class _Shared:
    """What every layer of one outer layout shares (computed once per :func:`layer_costs` call)."""

    profile: ModelProfile
    cluster: ClusterProfile
    layout: Layout
    train: TrainingConfig
    mode: str
    stack: SoftwareStack | None
    executor: bool
    """memory as autoplan's executor holds it"""
    tp_x: bool
    dp_x: bool
    """the gradient group (dp x cp ranks) spans nodes"""
    pp_x: bool
    cp_x: bool
    ddp: bool
    fsdp: bool
    accumulate: bool
    prec_b: int
    act_scale: float
    score_frac: float
    unsharded_frac: float
    attn_flop_frac: float
    w_b: int
    g_b: int
    o_b: int
    c_b: int
    cast_b: int
    """autocast's 16-bit weight copies (no FSDP)"""
    grads_replace_acts: bool
    opt_temp_b: int
    parts: tuple[float, float, float] | None
    k_dp: int
    world: int | None
    f_compute: float
    f_optimizer: float
    pipe: PipelineCosts | None
    """what the pipelines measured in groups of ``world`` processes cost beyond their layers"""
    output_kinds: frozenset[str]
    """kinds of the layers that make the model's output (the logits: the loss's input)"""
    block_kinds: frozenset[str]
    """kinds of the layers that are transformer blocks (``block.<i>``: FSDP2 units of their own)"""
    interference: float
    """compute lost per second of a data-parallel collective hidden behind it (software stacks only:
    :func:`~autoplan.plan.coefficient_sources.overlap_interference`)"""
    ddp_s_per_param: float | None
    """DDP's step as measured in groups, per parameter (pure data parallel over the in-group world:
    :func:`~autoplan.plan.coefficient_sources.in_group_ddp_s_per_param`); None: the all-reduce fit"""

    def dp_collective(self, op: str, nbytes: float) -> float:
        c = self.cluster
        if self.stack is not None and self.dp_x and c.source == "catalogue":
            from autoplan.profile.hardware import hierarchical_collective_s
            return hierarchical_collective_s(c, op, nbytes, self.layout.grad_group, self.k_dp)
        return collective_s(c, op, nbytes, self.layout.grad_group, self.dp_x)


def _shared(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, train: TrainingConfig,
            mode: str) -> _Shared:
    dp, tp, pp = layout.grad_group, layout.tp, layout.pp
    tp_x, dp_x, pp_x, cp_x = layout_spans(layout, cluster.devices_per_node, cluster.num_nodes)
    ddp, fsdp = data_parallel_wrapper(layout)
    accumulate = layout.num_microbatches > 1
    score_frac, unsharded_frac, attn_flop_frac = _block_fractions(profile)
    stack = software_stack(profile, train)
    executor = stack is None or stack.name == "autoplan"
    w_b, g_b, o_b = train.state_bytes_per_param(executor)
    c_b = train.compute_weight_bytes_per_param()
    world = in_group_world(profile, cluster)
    f_compute, f_optimizer = composition_factors(profile, world, layout.mbs) if world else (1.0, 1.0)
    return _Shared(
        profile=profile, cluster=cluster, layout=layout, train=train, mode=mode, stack=stack, executor=executor,
        tp_x=tp_x, dp_x=dp_x, pp_x=pp_x, cp_x=cp_x, ddp=ddp, fsdp=fsdp, accumulate=accumulate,
        prec_b=BYTES_PER_ELEMENT[train.precision],
        act_scale=BYTES_PER_ELEMENT[train.precision] / BYTES_PER_ELEMENT.get(profile.precision, 4),
        score_frac=score_frac, unsharded_frac=unsharded_frac, attn_flop_frac=attn_flop_frac,
        w_b=w_b, g_b=g_b, o_b=o_b, c_b=c_b, cast_b=c_b if executor and train.mixed else 0,
        grads_replace_acts=executor and dp == 1 and pp == 1 and not accumulate,     # cost.py docstring
        opt_temp_b=4 if executor and train.optimizer == "adamw" and cluster.device.type == "cuda" else 0,
        parts=_activation_parts(profile, stack), k_dp=group_ranks_per_node(tp, dp, cluster.devices_per_node),
        world=world, f_compute=f_compute, f_optimizer=f_optimizer,
        pipe=pipeline_costs_for(profile, world, pp) if world and pp > 1 else None,
        output_kinds=_output_kinds(profile),
        block_kinds=frozenset(info.kind for info in profile.layers if info.name.startswith("block.")),
        interference=overlap_interference(cluster) if stack is not None and stack.dp_overlap else 0.0,
        ddp_s_per_param=in_group_ddp_s_per_param(profile, layout, world) if world and ddp else None)


def _output_kinds(profile: ModelProfile) -> frozenset[str]:
    outputs = set(profile.output_layers())
    return frozenset(info.kind for info in profile.layers if info.name in outputs)


def layer_costs(profile: ModelProfile, cluster: ClusterProfile, layout: Layout,
                train: TrainingConfig, recompute: str | None = None) -> dict[str, LayerCost]:
    """Coefficients of every layer for the outer part of ``layout`` (stages are ignored), every
    layer recomputed with ``recompute`` (default: ``layout.recompute``; per-layer overrides in
    ``layout.recompute_layers`` are applied by :func:`costs_for_layout`)."""
    sh = _shared(profile, cluster, layout, train, recompute or layout.recompute)
    by_kind = {kind_name: _kind_cost(sh, kind_name, kind) for kind_name, kind in profile.kinds.items()}
    return {info.name: by_kind[info.kind] for info in profile.layers}


def _kind_cost(sh: _Shared, kind_name: str, kind) -> LayerCost:
    """The coefficients of one layer kind (module docstring)."""
    layout, stack = sh.layout, sh.stack
    shard = layout.tp if kind.tp_shardable else 1
    t = kind.timing(layout.mbs, shard)
    out_b = t.output_bytes * sh.act_scale / layout.cp      # each cp rank holds 1/cp of the sequence
    # recomputation applies to the transformer blocks (not a vocab-parallel embedding or head)
    is_block = kind.tp_shardable and not (stack is not None and kind_name in VOCAB_KINDS)
    act, full_act = _activation_bytes(sh, kind, shard, is_block, out_b * layout.cp)
    act, full_act = act / layout.cp, full_act / layout.cp
    tt = _time_terms(sh, kind_name, kind, shard, is_block, out_b)
    compute, recompute, tp_comm = tt.compute_s, tt.recompute_s, tt.tp_comm_s
    optimizer, slow = tt.optimizer_s, tt.slowdown
    p2p = _p2p_s(sh, kind_name, shard, out_b)
    if sh.pipe is not None and p2p > 0:
        # measured in groups (per_chunk_s, evaluate) at the runs' micro-batch: only larger messages add
        measured_b = kind.timing(sh.pipe.mbs).output_bytes * sh.act_scale
        p2p = extra_message_s(lambda b: _p2p_s(sh, kind_name, shard, b) / 2, out_b, measured_b)
    cp_comm, kv_gathered = _context_parallel_terms(sh, t, shard, is_block)
    if tt.cp_comm_s is not None:       # measured in groups: in place of the analytic exchange
        cp_comm = tt.cp_comm_s
    act += kv_gathered
    params = kind.param_count / shard
    grad_bytes = params * sh.g_b          # what DDP all-reduces, FSDP reduce-scatters (its reduce dtype)
    weight_bytes = params * sh.c_b        # what FSDP gathers (param_dtype) and computes with
    # the compute a layer's DP collectives can hide behind: one cp rank's share of the micro-batch
    t_rank = kind.timing(layout.mbs / layout.cp, shard) if layout.cp > 1 else t
    dp_sync, optimizer = _data_parallel_terms(sh, kind, params, t_rank.forward_s,
                                              t_rank.backward_s + recompute, optimizer)
    static, optimizer_phase, late_grads = _state_bytes(sh, params)
    if sh.grads_replace_acts:
        static -= grad_bytes
        act = max(act, grad_bytes)
    cal = sh.cluster.calibration
    cost = LayerCost(
        compute_s=compute * slow * cal.compute_scale, recompute_s=recompute * slow * cal.compute_scale,
        tp_comm_s=tp_comm * cal.tp_scale(layout.tp), cp_comm_s=cp_comm * cal.comm_scale, p2p_s=p2p * cal.comm_scale,
        dp_sync_s=dp_sync * cal.dp_sync_scale, optimizer_s=optimizer * slow * cal.compute_scale,
        static_bytes=int(math.ceil(static)),
        act_bytes=int(math.ceil(act)), out_bytes=int(math.ceil(out_b)),
        buffer_bytes=int(math.ceil(out_b / shard if _sends_slice(sh, kind_name, shard) else out_b)), held_out_bytes=int(math.ceil(out_b)) if sh.executor else 0,
        full_act_bytes=int(math.ceil(full_act / shard)), weight_bytes_unsharded=int(math.ceil(weight_bytes)),
        backward_transient_bytes=int(math.ceil(_loss_gradient_bytes(sh, kind_name, out_b))),
        fp8_workspace_bytes=int(math.ceil(params * sh.train.fp8_weight_bytes_per_param())),
        optimizer_phase_bytes=int(math.ceil(optimizer_phase)),
        optimizer_transient_bytes=int(math.ceil(_optimizer_transient_bytes(sh, kind_name, kind, shard))),
        late_grad_bytes=int(math.ceil(late_grads)) if sh.executor and not sh.grads_replace_acts else 0,
        fsdp_unit=(("block" if kind_name in sh.block_kinds else "root")
                   if sh.executor and sh.fsdp and layout.zero == 3 else ""))
    _check_range(cost, kind_name, layout)
    return cost


SINGLE_TENSOR_ADAMW_TEMPORARIES = 2
"""tensors of a parameter's size that torch's single-tensor AdamW holds at once: sqrt(v) and sqrt(v)
divided by the bias correction (seen with the live-tensor tracker on CPU, docs/probes/20261206e)"""


def _optimizer_transient_bytes(sh: _Shared, kind_name: str, kind, shard: int) -> float:
    """``LayerCost.optimizer_transient_bytes`` of a layer kind."""
    if not (sh.executor and sh.train.optimizer == "adamw") or sh.cluster.device.type == "cuda":
        return 0.0
    largest = kind.param_count / shard
    shape = sh.profile.shape or {}
    if kind_name in sh.block_kinds and shape.get("hidden") and shape.get("ffn_hidden"):
        largest = min(largest, shape["hidden"] * shape["ffn_hidden"] / shard)
    if sh.fsdp:
        largest /= sh.layout.grad_group       # FSDP2 shards every parameter on its first dim
    return SINGLE_TENSOR_ADAMW_TEMPORARIES * largest * sh.w_b


LOSS_GRADIENT_BYTES_PER_LOGIT = 8
"""autoplan's executor's loss (``token_cross_entropy``: ``F.cross_entropy`` on fp32 logits): at its
backward the fp32 gradients of the log-probabilities and of the logits are alive together"""


def _loss_gradient_bytes(sh: _Shared, kind_name: str, out_b: float) -> float:
    """``LayerCost.backward_transient_bytes`` of a layer kind: the loss's two fp32 gradients for a
    kind whose output is the model's (the logits) under autoplan's executor, else 0 (its output's
    gradient, ``out_bytes``; other stacks' losses are fused, vocabulary-parallel or not modelled)."""
    if not sh.executor or kind_name not in sh.output_kinds:
        return 0.0
    return out_b / sh.prec_b * LOSS_GRADIENT_BYTES_PER_LOGIT


def _activation_bytes(sh: _Shared, kind, shard: int, is_block: bool, out_b: float) -> tuple[float, float]:
    """(saved activations per micro-batch on one TP rank, the layer's activations without
    recomputation or TP) after TP/SP and the layer's recompute mode."""
    layout, stack = sh.layout, sh.stack
    t = kind.timing(layout.mbs, shard)
    t1 = kind.timing(layout.mbs, 1)
    full_act = t1.saved_activation_bytes * sh.act_scale
    score_frac = sh.score_frac
    if stack is not None and is_block and sh.parts is not None:
        whole, split, scores = sh.parts
        tokens_16bit = sh.profile.seq_len * layout.mbs * sh.prec_b / 2
        act = tokens_16bit * (whole / (shard if layout.sp else 1) + split / shard + scores / shard)
        full_act = tokens_16bit * (whole + split + scores)
        score_frac = scores / (whole + split + scores)
    elif stack is not None and not is_block:
        act = t.saved_activation_bytes * sh.act_scale
    elif shard > 1 and not layout.sp:
        act = full_act * (sh.unsharded_frac + (1 - sh.unsharded_frac) / shard)
    else:
        act = full_act / shard
    if sh.mode == "selective" and is_block:
        if t1.saved_activation_bytes_selective is not None and t1.saved_activation_bytes > 0:
            # measured with the executor's own selective wrapper (profile/layers.py)
            act *= t1.saved_activation_bytes_selective / t1.saved_activation_bytes
        else:     # from the shape: the attention scores dropped
            act *= (1 - score_frac)
    elif sh.mode == "full" and is_block:
        act = out_b / (shard if layout.sp else 1)   # keep only the block input
    return act, full_act


@dataclass(frozen=True)
class _TimeTerms:
    """One layer's time terms per micro-batch (optimizer: per step) before calibration."""

    compute_s: float
    recompute_s: float
    tp_comm_s: float
    optimizer_s: float
    slowdown: float
    """the cluster's compute slowdown for figures measured alone (1: measured in groups, or analytic)"""
    cp_comm_s: float | None = None
    """measured under the layout's cp in groups (:func:`in_group_cp_terms`); None: the analytic
    exchange of :func:`_context_parallel_terms` applies"""


def _time_terms(sh: _Shared, kind_name: str, kind, shard: int, is_block: bool, out_b: float) -> _TimeTerms:
    """One layer's time terms from the best source the profile has
    (:mod:`autoplan.plan.coefficient_sources`)."""
    layout, stack = sh.layout, sh.stack
    mode = sh.mode if is_block else "none"
    measured = in_group_terms(kind, layout, layout.mbs, shard, sh.world, mode, sh.attn_flop_frac,
                              sh.train.optimizer) if sh.world else None
    cp = layout.cp
    if measured is not None:
        compute, recompute, tp_comm, optimizer = measured
        compute, recompute, optimizer = compute * sh.f_compute, recompute * sh.f_compute, optimizer * sh.f_optimizer
        if sh.fsdp:
            optimizer /= layout.grad_group   # unless measured under FSDP (_data_parallel_terms): this rank's shard
        in_cp = (in_group_cp_terms(kind, layout, layout.mbs, shard, sh.world, mode, sh.attn_flop_frac)
                 if cp > 1 and is_block else None)
        if in_cp is not None:      # measured under this cp: a cp rank's compute, TP's share, and the rest
            compute, recompute, tp_comm, cp_comm = in_cp
            return _TimeTerms(compute * sh.f_compute, recompute * sh.f_compute, tp_comm, optimizer, 1.0, cp_comm)
        # measured with every device working at once, at cp = 1: a cp rank does 1/cp of it
        return _TimeTerms(compute / cp, recompute / cp, tp_comm / cp, optimizer, 1.0)
    # a cp rank's work: 1/cp of each sequence's tokens and (load-balanced) of its attention, i.e. the
    # layer's time at a micro-batch of mbs/cp sequences (the profile's fit in mbs keeps its fixed costs)
    t = kind.timing(layout.mbs / cp if cp > 1 else layout.mbs, shard)
    if stack is not None:
        compute, recompute, tp_comm = stack_terms(sh.profile, sh.cluster, layout, stack, kind_name, t, out_b,
                                                  shard, sh.tp_x, mode, is_block, sh.prec_b)
    else:
        compute, recompute, tp_comm = sum_of_parts_terms(sh.cluster, layout, t.forward_s, t.backward_s, out_b,
                                                         shard, sh.tp_x, mode, sh.attn_flop_frac,
                                                         t.selective_recompute_s)
    opt_rate = sh.profile.optimizer_step_s_per_param
    if sh.train.optimizer == "sgd" and sh.profile.optimizer_step_s_per_param_sgd > 0:
        opt_rate = sh.profile.optimizer_step_s_per_param_sgd
    optimizer = opt_rate * kind.param_count / shard / (layout.grad_group if sh.fsdp else 1)
    # layers are profiled alone; in training every device computes at once
    slow = sh.cluster.device.compute_slowdown if sh.profile.source == "measured" else 1.0
    return _TimeTerms(compute, recompute, tp_comm, optimizer, slow)


def _context_parallel_terms(sh: _Shared, t, shard: int, is_block: bool) -> tuple[float, float]:
    """(exposed K,V exchange per micro-batch, bytes of gathered K,V saved for backward) of one
    attention layer (a transformer block) under context parallel
    (:func:`~autoplan.plan.coefficient_sources.cp_exchange_s`); (0, 0) for other layers and cp = 1.
    The all-gather exchange keeps the other ranks' K,V for the backward; the ring holds one chunk
    in flight, torch's rotation gathers them again in backward.  The exchanged K,V have the KV heads
    (GQA), or every query head where the stack repeats them before attention
    (``SoftwareStack.cp_kv_heads_repeated``).  ``t``: the layer's timing at the full sequence."""
    layout, shape = sh.layout, sh.profile.shape or {}
    if layout.cp <= 1 or not is_block or not shape.get("heads"):
        return 0.0, 0.0
    head_dim = shape["hidden"] / shape["heads"]
    exchanged_heads = shape["heads"] if sh.stack is not None and sh.stack.cp_kv_heads_repeated else shape.get(
        "kv_heads", shape["heads"])
    kv_heads = max(1.0, exchanged_heads / shard)
    kv_chunk_b = 2 * sh.profile.seq_len / layout.cp * layout.mbs * kv_heads * head_dim * sh.prec_b
    attn_fwd = t.forward_s * sh.attn_flop_frac / layout.cp
    attn_bwd = t.backward_s * sh.attn_flop_frac / layout.cp
    exchange = sh.stack.cp_exchange if sh.stack is not None else "all_gather"
    comm = cp_exchange_s(sh.cluster, layout, kv_chunk_b, attn_fwd, attn_bwd, exchange, sh.cp_x, sh.mode)
    kept = (layout.cp - 1) * kv_chunk_b if exchange == "all_gather" and sh.mode != "full" else 0.0
    return comm, kept


def _sends_slice(sh: _Shared, kind_name: str, shard: int) -> bool:
    """Whether 1/tp of the boundary tensor crosses a pipeline cut: Megatron's scatter/gather, or the
    sequence-parallel slice a Megatron stage hands over as it is."""
    stack = sh.stack
    if stack is None or shard == 1 or kind_name == "head":
        return False
    return stack.pp_scatter_gather or (sh.layout.sp and stack.sp_slice_between_stages)


def _p2p_s(sh: _Shared, kind_name: str, shard: int, out_b: float) -> float:
    """Sending the layer's output to the next pipeline stage and its gradient back, per micro-batch."""
    layout, stack, cluster = sh.layout, sh.stack, sh.cluster
    if layout.pp == 1:
        return 0.0
    send_b = out_b
    gather = 0.0
    if _sends_slice(sh, kind_name, shard):
        # send 1/tp of the boundary tensor, all-gather it over NVLink on arrival
        send_b = out_b / shard
        gather = 0.0 if layout.sp else collective_s(cluster, "all_gather", out_b, layout.tp, sh.tp_x)
    p2p = 2 * (cluster.collective_time_s("send_recv", send_b, 2, sh.pp_x) + gather)
    if stack is not None and stack.pp_overlap:
        p2p = 0.0
    return p2p


def _data_parallel_terms(sh: _Shared, kind, params: float, fwd: float, bwd: float,
                         optimizer: float) -> tuple[float, float]:
    """(dp_sync per step, optimizer per step) of one layer under the executor's DP wrapper: DDP's
    all-reduce, FSDP's gathers and reduce-scatters (measured in groups where the profile has them),
    exposed or hidden behind the layer's compute as the software stack overlaps them: ``fwd`` and
    ``bwd`` are that compute per micro-batch on one device, i.e. one cp rank's share of the
    sequence (a cp rank computes 1/cp of each layer), the backward with the layer's recomputation
    (FSDP gathers a checkpointed block's weights before its recomputed forward, so the next
    block's prefetch runs behind both)."""
    layout, stack = sh.layout, sh.stack
    grad_bytes = params * sh.g_b
    weight_bytes = params * sh.c_b
    overlap = stack is not None and stack.dp_overlap

    def hidden(comm_s: float, window_s: float) -> float:      # what the collective costs the step
        return exposed_s(comm_s, window_s, overlap, sh.interference)

    fsdp_measured = (in_group_fsdp_s(kind, layout, layout.mbs, sh.world)
                     if (sh.world and sh.fsdp and params > 0) else None)
    if sh.ddp and params > 0:
        if sh.ddp_s_per_param is not None:
            return sh.ddp_s_per_param * params, optimizer
        dp_sync = ddp_sync_s(sh.cluster, layout, params, grad_bytes, params * sh.w_b,
                             matrix_width(sh.profile, params), sh.dp_x)
        if not layout.lossy and stack is not None:
            dp_sync = hidden(sh.dp_collective("all_reduce", grad_bytes), bwd)
        return dp_sync, optimizer
    if fsdp_measured is not None:
        dp_sync, fsdp_adamw_s = fsdp_measured
        if sh.train.optimizer == "adamw":
            optimizer = fsdp_adamw_s * sh.f_optimizer
        return dp_sync, optimizer
    if not (sh.fsdp and params > 0):
        return 0.0, optimizer
    ag = sh.dp_collective("all_gather", weight_bytes)
    rs = sh.dp_collective("reduce_scatter", grad_bytes)
    m = layout.num_microbatches
    if stack is None:
        gathers = 2 * m if layout.zero == 3 else 1
        return gathers * ag + rs, optimizer
    if stack.fsdp_sync_every_microbatch:
        # every micro-batch's backward reduce-scatters its gradients (ZeRO-3: after gathering the
        # weights again); the weights are gathered before each forward (ZeRO-3) or once, after the
        # optimizer step
        bwd_ag = ag if layout.zero == 3 else 0.0
        fwd_ags = m if layout.zero == 3 else 1
        return fwd_ags * hidden(ag, fwd) + m * hidden(bwd_ag + rs, bwd), optimizer
    if layout.zero == 3:
        # gathered again before every micro-batch's forward and backward (prefetched while the
        # previous layer computes); gradients reduce-scattered after the last backward
        return m * hidden(ag, fwd) + (m - 1) * hidden(ag, bwd) + hidden(ag + rs, bwd), optimizer
    # gradients reduce-scattered during the last backward, updated weights gathered ahead of the
    # first forward
    return hidden(rs, bwd) + hidden(ag, fwd), optimizer


def _state_bytes(sh: _Shared, params: float) -> tuple[float, float, float]:
    """(bytes held during the step, bytes held during the optimizer step, the gradients among the
    former) of one layer's parameters, gradients and optimizer state on one device (cost.py
    docstring, "Memory")."""
    w_b, g_b, o_b, c_b = sh.w_b, sh.g_b, sh.o_b, sh.c_b
    if sh.ddp:     # the gradients and DDP's buckets (made when DDP wraps the model, not by backward)
        return (params * (w_b + 2 * g_b + o_b + sh.cast_b), params * (w_b + 2 * g_b + o_b + sh.opt_temp_b),
                params * g_b)
    if sh.fsdp:
        dp, stack, zero = sh.layout.grad_group, sh.stack, sh.layout.zero
        whole_grads = sh.accumulate and not (stack is not None and stack.fsdp_sync_every_microbatch)
        if sh.executor or zero == 3:
            # FSDP2 over fp32 shards (autoplan's executor at every level; any ZeRO-3): shards, plus the
            # gathered 16-bit weights kept from forward to backward below ZeRO-3
            grads = g_b / dp + (g_b if whole_grads else 0)
            static = params * ((w_b + o_b) / dp + grads + (c_b if zero < 3 else 0))
        else:
            # 16-bit weights whole on every rank (they are the weights computed with); ZeRO-1 (Megatron's
            # distributed optimizer) keeps a whole gradient buffer and shards the fp32 state; ZeRO-2
            # shards the gradients too, keeping them whole while accumulating
            grads = g_b if zero == 1 else g_b / dp + (g_b if whole_grads else 0)
            static = params * (w_b + grads + o_b / dp)
        return static, params * (w_b + g_b + o_b + sh.opt_temp_b) / dp, params * grads
    return params * (w_b + g_b + o_b + sh.cast_b), params * (w_b + g_b + o_b + sh.opt_temp_b), params * g_b


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
    return block_activation_parts(ModelShape.from_dict(profile.shape), profile.seq_len, stack,
                                  fp8=is_fp8(profile.precision))


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
