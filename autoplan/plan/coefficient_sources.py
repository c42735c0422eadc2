"""Where a layer's time coefficients come from, one function per source (best first):

- :func:`in_group_terms` / :func:`in_group_cp_terms` / :func:`in_group_fsdp_s`: measured inside real
  groups of N processes (``autoplan profile model --nproc N``), with :func:`composition_factors` for
  the whole model;
- :func:`stack_terms`: an analytic profile under its software stack (kernels, overlaps);
- :func:`sum_of_parts_terms`: one rank's compute measured alone plus alpha-beta fits of isolated
  collectives (other group sizes, other nodes, catalogue hardware).

Plus the communication terms they share: Megatron TP's block collectives (:func:`block_tp_comm_s`)
and DDP's synchronisation with the lossy options (:func:`ddp_sync_s`).
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from autoplan.errors import InputError
from autoplan.plan.groups import collective_s
from autoplan.plan.plan import POWERSGD_RANK, Layout
from autoplan.profile.assumptions import KERNELS, SoftwareStack
from autoplan.profile.formats import ClusterProfile, ModelProfile
from autoplan.profile.hardware import accelerator_of

if TYPE_CHECKING:
    from autoplan.models.source import ModelSource


def exposed_s(comm_s: float, window_s: float, overlap: bool, interference: float = 0.0) -> float:
    """What a collective adds to the step when it may overlap ``window_s`` of compute: the part the
    window does not hide, plus ``interference`` x the hidden part (the compute slowed while the
    collective holds some of the device's SMs, :func:`overlap_interference`)."""
    if not overlap:
        return comm_s
    hidden = min(comm_s, window_s)
    return comm_s - hidden + interference * hidden


def overlap_interference(cluster: ClusterProfile) -> float:
    """The share of a catalogue GPU's compute an NCCL collective takes while it overlaps compute:
    ``KernelAssumptions.collective_overlap_sms / sm_count`` (0 for a device without an SM count: a
    device not in the catalogue, a CPU)."""
    acc = accelerator_of(cluster.device.name)
    if acc is None or not acc.sm_count:
        return 0.0
    return min(1.0, KERNELS.collective_overlap_sms / acc.sm_count)


def stack_terms(profile: ModelProfile, cluster: ClusterProfile, layout: Layout, stack: SoftwareStack, kind_name: str,
                 t, out_b: float, shard: int, tp_x: bool, mode: str, is_block: bool,
                 prec_b: int) -> tuple[float, float, float]:
    """(compute, recompute, tp_comm) per micro-batch of an analytic profile's layer under its software
    stack (module docstring, "Software stack"). ``t`` is the layer's timing at this TP degree for one
    cp rank's share of the micro-batch; ``out_b`` the boundary tensor of one cp rank (1/cp of the sequence).

    Blocks: Megatron TP's two all-reduces of the block output in forward and two in backward (SP:
    an all-gather and a reduce-scatter each; full recompute repeats the forward's two). A
    vocab-parallel embedding all-reduces (SP: reduce-scatters) its output in forward, a
    vocab-parallel head its input gradient in backward (SP: all-gather + reduce-scatter)."""
    tp, cp = layout.tp, layout.cp
    compute = t.forward_s + t.backward_s
    if layout.sp and shard > 1 and is_block:
        compute -= t.sequence_parallel_saving_s
    recompute = t.selective_recompute_s if mode == "selective" else (t.forward_s if mode == "full" else 0.0)
    tp_comm = 0.0
    if shard > 1 and is_block:
        tp_comm = block_tp_comm_s(cluster, layout, out_b, tp_x, mode)
    elif shard > 1:
        hidden_b = profile.seq_len / cp * layout.mbs * int((profile.shape or {}).get("hidden", 0)) * prec_b
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


def sum_of_parts_terms(cluster: ClusterProfile, layout: Layout, fwd: float, bwd: float, out_b: float, shard: int,
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


def cp_exchange_s(cluster: ClusterProfile, layout: Layout, kv_chunk_b: float, attn_fwd_s: float, attn_bwd_s: float,
                  exchange: str, cp_x: bool, mode: str) -> float:
    """Exposed time of context parallel's key/value exchange in one attention layer, per micro-batch on
    one rank.  ``kv_chunk_b``: the K and V of one rank's 1/cp of the sequence in 16 bits (GQA: its kv
    heads only, unless the framework repeats them before attention); ``attn_*_s``: the rank's
    attention-core time (1/cp of the layer's, by causal load balance), so each of the cp ring steps
    computes ``attn / cp``.

    ring          cp-1 steps; step i sends the K,V chunk in hand to the next rank while attending to
                  it, so each step costs max(send, attention / cp); backward sends K,V and their
                  gradients (2x the bytes) behind the backward attention (Megatron's p2p ring)
    all_gather    all-gather K,V (cp x the chunk) before attention, reduce-scatter their gradients
                  after it; nothing hidden (autoplan's executor)
    torch_rotate  torch's ``context_parallel`` with its default ``allgather`` rotation (torch
                  distributed/tensor/experimental/_attention.py, ``_templated_ring_attention`` and its
                  backward): forward starts one all-gather of K,V before the first (diagonal) step and
                  waits for it after that step, so only that step's attention hides it; backward
                  all-gathers K,V again the same way, and passes the K,V gradients around the ring in
                  fp32 (2x the 16-bit bytes): each step's send is hidden behind the next step, the
                  last one is waited for after the loop (exposed)
    Full recompute repeats the forward exchange."""
    cp = layout.cp
    if cp <= 1 or kv_chunk_b <= 0:
        return 0.0
    if exchange == "ring":
        send_fwd = cluster.collective_time_s("send_recv", kv_chunk_b, 2, cp_x)
        send_bwd = cluster.collective_time_s("send_recv", 2 * kv_chunk_b, 2, cp_x)
        fwd = (cp - 1) * max(0.0, send_fwd - attn_fwd_s / cp)
        bwd = (cp - 1) * max(0.0, send_bwd - attn_bwd_s / cp)
    elif exchange == "torch_rotate":
        gather = collective_s(cluster, "all_gather", cp * kv_chunk_b, cp, cp_x)
        send_grads = cluster.collective_time_s("send_recv", 2 * kv_chunk_b, 2, cp_x)
        fwd = max(0.0, gather - attn_fwd_s / cp)
        bwd = max(0.0, gather - attn_bwd_s / cp) + (cp - 1) * max(0.0, send_grads - attn_bwd_s / cp) + send_grads
    else:
        fwd = collective_s(cluster, "all_gather", cp * kv_chunk_b, cp, cp_x)
        bwd = collective_s(cluster, "reduce_scatter", cp * kv_chunk_b, cp, cp_x)
    return fwd * (2 if mode == "full" else 1) + bwd


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


def in_group_advice(profile: ModelProfile, cluster: ClusterProfile, model: str | ModelSource) -> str:
    """What the user should know about ``profile`` on ``cluster``, in one line: that it lacks timings
    measured in groups of the cluster's processes (``model``, a spec or already resolved: its file, or
    the model measured on the fly), so layouts are costed from layers measured alone, and the command
    that measures them; the empty string where the in-group figures are there or cannot apply (analytic profiles,
    catalogue clusters, several nodes, one process, another device type)."""
    world = cluster.world_size
    if (profile.source != "measured" or cluster.source == "catalogue" or cluster.num_nodes > 1 or world < 2
            or profile.environment.get("device_type", cluster.device.type) != cluster.device.type
            or in_group_world(profile, cluster) is not None):
        return ""
    measured = sorted(set().union(*(k.group_worlds() for k in profile.kinds.values())))
    where = f"in groups of {', '.join(map(str, measured))} processes" if measured else "alone"
    spec, is_file = _profile_file_spec(model)
    cmd, then = _profile_command(profile, cluster, spec, is_file, measured_mbs(profile))
    named = spec if is_file else f"of {spec}"
    return (f"the model profile {named} was measured {where}, not in "
            f"groups of the cluster's {world} processes: layouts are costed from parts measured alone, which "
            f"under-predicts collectives and shared cores; measure it: {cmd}{then}")


def measured_mbs(profile: ModelProfile) -> list[int]:
    """The micro-batch sizes the profile's layers were timed at."""
    return sorted({t.mbs for k in profile.kinds.values() for t in k.timings})


def _profile_file_spec(model: str | ModelSource) -> tuple[str, bool]:
    """(the model's spec, whether it names a model profile file, which ``profile model --out`` may write again;
    never a shape file or anything else measured on the fly). A spec not yet resolved is resolved here; one
    that does not resolve (a :class:`~autoplan.plan.api.Problem` built in code with a placeholder name) is no
    profile file."""
    from autoplan.models.source import resolve_model
    if not isinstance(model, str):
        return model.spec, model.form == "profile_file"
    if not model.endswith(".json"):
        return model, False
    try:
        return model, resolve_model(model).form == "profile_file"
    except InputError:
        return model, False


def _profile_command(profile: ModelProfile, cluster: ClusterProfile, spec: str, is_file: bool,
                     mbs: list[int]) -> tuple[str, str]:
    """(the ``profile model`` command that measures ``profile`` again at ``mbs`` on ``cluster``'s
    processes, what to do with its output). It writes over ``spec`` only where that is a model profile
    file (``is_file``, :func:`_profile_file_spec`)."""
    out = spec if is_file else "model.json"
    cmd = (f"autoplan profile model --model {profile.model_spec or spec} --out {out} "
           f"--mbs {','.join(map(str, mbs))} --nproc {cluster.world_size}")
    if cluster.device.type == "cuda":
        cmd += " --device cuda"
    if profile.precision != ("bf16" if cluster.device.type == "cuda" else "fp32"):     # profile model's default
        cmd += f" --precision {profile.precision}"
    return cmd, ("" if is_file else f", then pass --model {out}")


def unmeasured_mbs_note(profile: ModelProfile, cluster: ClusterProfile, model: str | ModelSource, mbs: int) -> str:
    """One line where a plan's micro-batch size ``mbs`` lies outside the sizes a measured profile timed
    (its times then come from :func:`autoplan.profile.formats.mbs_curve`), with the command that
    measures it; the empty string otherwise."""
    sizes = measured_mbs(profile)
    if profile.source != "measured" or not sizes or sizes[0] <= mbs <= sizes[-1]:
        return ""
    cmd, then = _profile_command(profile, cluster, *_profile_file_spec(model), sorted({*sizes, mbs}))
    return (f"note: micro-batch size {mbs} lies beyond the measured sizes ({', '.join(map(str, sizes))}); its "
            f"times are extrapolated, no cheaper per sample than the nearest measured size; measure it: {cmd}{then}")


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


def in_group_terms(kind, layout: Layout, mbs: int, shard: int, world: int, mode: str, attn_flop_frac: float,
                    optimizer: str) -> tuple[float, float, float, float] | None:
    """(compute, recompute, tp_comm, optimizer) of one layer from figures measured inside real
    groups of ``world`` processes working at once (:mod:`autoplan.execute.group_profile`), or None
    where that case was not measured.

    ``compute`` is the layer's in-group time on its own (TP degree 1) divided by the TP degree:
    the arithmetic a TP rank would do if sharding were free; ``tp_comm`` is the rest of the
    TP-sharded in-group time: collectives, their waits for the slowest rank, DTensor's per-op work
    and smaller, slower matrix products. Selective recompute costs what it added to the layer alone,
    scaled to the group (:func:`in_group_selective_s`; without that figure, the attention core's share of
    the compute); full recompute the whole in-group forward, its collectives included."""
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
        recompute = in_group_selective_s(kind, mbs, shard, g.forward_s + g.backward_s)
        if recompute is None:
            recompute = base.forward_s / shard * attn_flop_frac
    elif mode == "full":
        recompute = g.forward_s
    opt = g.optimizer_sgd_s if optimizer == "sgd" else g.optimizer_s
    return compute, recompute, total - compute, opt


def in_group_selective_s(kind, mbs: int, shard: int, in_group_s: float) -> float | None:
    """What selective recomputation adds to one micro-batch of a layer inside the group: the time it
    added when the layer was measured alone (``LayerTiming.selective_recompute_s``: its op-level policy
    in forward and the recomputation in backward) times the layer's in-group over its alone time
    (``in_group_s`` over the alone forward+backward at the same TP degree). None where the profile has
    no such figure (profiles without it: the caller takes the attention core's share instead)."""
    if not kind.timings:
        return None
    t = kind.timing(mbs, shard)
    alone = t.forward_s + t.backward_s
    if t.selective_recompute_s <= 0 or alone <= 0:
        return None
    return t.selective_recompute_s * in_group_s / alone


def in_group_cp_terms(kind, layout: Layout, mbs: int, shard: int, world: int, mode: str,
                      attn_flop_frac: float) -> tuple[float, float, float, float] | None:
    """(compute, recompute, tp_comm, cp_comm) of one transformer block on one cp rank per micro-batch,
    from the block measured under context parallel over ``layout.cp`` ranks inside real groups of
    ``world`` processes (the executor's K/V exchange, at the layout's TP degree and sp where that was
    measured), or None where that case was not measured.

    It replaces, for that block, the analytic estimate: the in-group time at cp = 1 divided by cp
    plus the alpha-beta K/V all-gather and reduce-scatter (:func:`cp_exchange_s`). As for TP
    (:func:`in_group_terms`): ``compute`` is the block's in-group time without cp or TP divided by
    tp x cp (a cp rank's arithmetic if the split were free); with TP, ``tp_comm`` is what TP adds at
    cp = 1 (its in-group time beyond the unsharded one over tp), per cp rank (/ cp), as far as the
    measured time leaves room; ``cp_comm`` the rest of the measured time: the exchange, its waits for
    the slowest rank, the attention against the gathered keys and the shared cores. The three add up
    to the measured time. Selective recompute repeats the attention core's share of that compute,
    full recompute the measured forward, exchange included."""
    cp = layout.cp
    base = kind.group_timing(mbs, world=world)
    sp = layout.sp if shard > 1 else 0
    g = kind.group_timing(mbs, world=world, tp=shard, sp=sp, cp=cp) if cp > 1 else None
    if base is None or g is None:
        return None
    total = g.forward_s + g.backward_s
    compute = min(total, (base.forward_s + base.backward_s) / shard / cp)
    tp_only = kind.group_timing(mbs, world=world, tp=shard, sp=sp) if shard > 1 else None
    tp_comm = 0.0
    if tp_only is not None:
        tp_comm = min(total - compute, max(0.0, (tp_only.forward_s + tp_only.backward_s) / cp - compute))
    recompute = 0.0
    if mode == "selective":
        recompute = base.forward_s / shard / cp * attn_flop_frac
    elif mode == "full":
        recompute = g.forward_s
    return compute, recompute, tp_comm, total - compute - tp_comm


def in_group_fsdp_s(kind, layout: Layout, mbs: int, world: int) -> tuple[float, float] | None:
    """(dp_sync per step, AdamW step) of one layer under FSDP, from in-group figures of a ZeRO-3
    block over ``layout.dp`` ranks (TP degree 1 only), or None where not measured.

    Per micro-batch ZeRO-3 all-gathers the weights for forward and again for backward (with
    FSDP2's copy-in/out): the in-group forward+backward beyond the unwrapped layer's; the step's
    last backward also reduce-scatters: the synced backward beyond the unsynced one. ZeRO 0-2 keep
    the gathered weights from forward to backward: one all-gather (half the per-micro-batch extra)
    and one reduce-scatter per step."""
    if layout.tp > 1 or layout.cp > 1:
        return None
    base = kind.group_timing(mbs, world=world)
    z3 = kind.group_timing(mbs, world=world, dp=layout.dp)
    if base is None or z3 is None:
        return None
    gathers = max(0.0, z3.forward_s + z3.backward_s - base.forward_s - base.backward_s)
    reduce = max(0.0, z3.backward_sync_s - z3.backward_s)
    per_step = layout.num_microbatches * gathers if layout.zero == 3 else gathers / 2
    return per_step + reduce, z3.optimizer_s


def in_group_ddp_s_per_param(profile: ModelProfile, layout: Layout, world: int) -> float | None:
    """What DDP's all-reduce adds to a step, per parameter, where the layout is data parallel over every
    process of the in-group world (no TP, PP or cp, exact gradients) and the profile timed the whole
    model under DDP there (``GroupTiming.backward_sync_s`` of its figures): the whole model's DDP step
    beyond its plain one over its parameters (a layer pays it times its own); None otherwise. One
    figure for every micro-batch size, the median over the measured sizes: the all-reduce moves the
    same bytes at every size, and each size's difference of two timings scatters (31-64 ms over four
    sizes on seed 20261221's workload 1), which would otherwise decide between micro-batch sizes.

    Measured, not the cluster's all-reduce fit, because on processes that share cores the all-reduce
    runs beside the other ranks' backward and slows it: on fidelity seed 20261221's workload 2 (4
    processes, 2 cores) the executor's DDP step ran 66 ms above the whole model's in one job, where the
    fit priced the all-reduce at 31 ms, and its data-parallel layouts measured 18-19% above their
    predictions (docs/fidelity.md)."""
    if world < 2 or layout.dp != world or layout.tp > 1 or layout.pp > 1 or layout.cp > 1 or layout.lossy:
        return None
    added = [g.backward_sync_s - g.backward_s for g in profile.whole_model_timings
             if g.key() == (world, 1, 0, 1, 1) and g.backward_sync_s > 0]
    total = profile.total_params()
    if not added or total <= 0:
        return None
    return max(0.0, statistics.median(added)) / total


def matrix_width(profile: ModelProfile, params: float) -> float:
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
    g = layout.grad_group
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
