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

Where the model profile holds pipelines measured in groups of the cluster's size (``profile model
--nproc N``, :mod:`autoplan.plan.pipeline_costs`; those of the measured depth nearest the layout's pp),
a pipeline also costs what they showed beyond their
layers: ``a`` per chunk and micro-batch (its schedule actions and messages; it replaces the cluster's
send/recv fit, whose growth beyond the measured message size is kept) in ``C_j`` and so ``vp * a`` in
``tau_r`` (reported in ``pp_p2p``), ``c`` per step (in ``bubble``), and the shared-device relief as
they showed it (the schedule run with the busy ranks sharing the cores moment by moment, at the
slowdown ``s`` the runs measured, not the cluster's, and a waiting rank leaving the share ``e`` of its
core: :func:`~autoplan.plan.pipeline_costs.pipeline_relief`). All three are constant for an outer layout, so the
placement ILP is unchanged and its bounds stay bounds. A fit that does not explain its own runs
(``pipeline_costs.FIT_ERROR_LIMIT``) is not used.

Where the coefficients come from, per layer kind, best first:

- **measured inside real groups** (``autoplan profile model --nproc N``,
  :mod:`autoplan.execute.group_profile`) for a cluster of N devices on one node: forward+backward
  with every device working at once, TP blocks through the executor's DTensor plan with their
  collectives (``compute`` = the unsharded in-group time / t, ``tp_comm`` = the rest: collectives,
  waits for the slowest rank, DTensor's per-op work), ZeRO-3 blocks through FSDP2 (``dp_sync`` =
  the extra all-gather and reduce-scatter time with copy-in/out), context-parallel blocks through
  the executor's K/V exchange (``compute`` = the in-group time without cp / (t cp), with TP
  ``tp_comm`` = TP's in-group extra at cp = 1 / cp, ``cp_comm`` = the rest, in place of the
  analytic exchange), the optimizer step on the parameters as wrapped;
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
    dp_overlap    each layer's collective hides behind that layer's compute of one micro-batch on one
                  device (a cp rank's 1/cp of it): exposed = max(0, collective - window); gradient
                  reduction behind the backward (with its recomputation), parameter gathers (ZeRO-3
                  every micro-batch, ZeRO-1/2 after the step) behind the forward; the hidden part
                  still costs (SMs the collective holds / SM count) of its duration in compute: the
                  SMs NCCL takes from the kernels it overlaps (``coefficient_sources.overlap_interference``)
    fsdp_sync_every_microbatch  reduce-scatter every micro-batch, no whole gradients kept
    DP groups spanning nodes with k ranks per node (catalogue clusters) run hierarchically:
                  ``hardware.hierarchical_collective_s`` (every GPU's own NIC carries 1/k of the data;
                  all-gather and reduce-scatter pay NCCL's ring latency, one step per rank)

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
               recomputation; n_i micro-batches of local chunk i in flight, ``schedules.inflight_vectors``:
               1 without PP, m for GPipe, min(m, pp-r) for 1F1B, torch's order for interleaved),
               static less the gradients not made yet at that moment (below)
    buffers  = the pipeline's own memory, ``pipeline_buffers`` (plan/memory.py): receive buffers in
               transit, one per side of a cut (``LayerCost.buffer_bytes``: each lives from its receive
               to the backward that consumes it, as in Megatron and in autoplan's executor, whose
               buffers are allocated just in time, execute/pp_buffers.py; a received activation
               waiting for its backward is the chunk's input, counted in acts), plus the outputs a
               chunk keeps per in-flight micro-batch, sum_i n_i * held(chunk i) at the peak moment of
               acts + held (``LayerCost.held_out_bytes``: torch's stage keeps each micro-batch's
               output until its backward, the last stage its logits; Megatron frees them after the
               send). The executor asks the schedule not to keep the last stage's outputs after
               their backward: ``step(..., return_outputs=False)``
    workspace= ZeRO-3: the rank's root unit gathered (embedding, head: FSDP2 keeps a root's
               parameters from forward to backward) and the largest block three times (the one in
               backward, the one prefetched, its unsharded gradient) under autoplan's executor, two
               layers' weights and one gradient elsewhere; FSDP without accumulation: one layer's
               unsharded gradient before its reduce-scatter; full recompute: one layer's
               activations; and the gradient of the largest layer output during backward (the
               logits on the last pipeline rank, the largest other output elsewhere)
    end      = ZeRO-3 under autoplan's executor, a moment of its own: at the end of the backward the
               root unit reduces its gradients with the activations gone, static (every gradient
               made) + 4 x the root unit (``memory.rank_backward_end_bytes``)

``c [mixed]`` without FSDP is autocast's cache in autoplan's executor: the 16-bit copy of every
weight, made at its first use in a step and held until the step's autocast context ends.

In autoplan's executor gradients exist from their layer's backward to the optimizer step (its scripts
zero them with ``set_to_none``). With one micro-batch, one pipeline stage and no DP wrapper (one
device, or pure TP) nothing else holds them while activations are alive: backward frees a layer's
activations as it makes its gradients, so a layer is counted at max(act_l, P_l * g) instead of both
(the ``activations`` term then holds the larger). Everywhere else gradients coexist with
activations (accumulation over micro-batches, 1F1B's interleaved backwards), but not before they
are made: a rank's memory is the largest over the moments of its schedule
(:func:`~autoplan.plan.schedules.peak_moments`), and at a moment before a chunk's first backward of
the step that chunk's gradients (``LayerCost.late_grad_bytes``, FSDP2's accumulated and sharded ones
included, though FSDP makes the sharded ones at the last backward) do not exist yet: without a
pipeline the end of a step's only forward (m = 1), GPipe's end of the forward, 1F1B's first rank at
m = pp, interleaved's warm-up. DDP's buckets exist from its construction and are counted at every
moment (on CPU the live-tensor tracker sees them only from the backward that first fills them: there
a DDP step of one micro-batch measures its buckets' size below what it holds). The stacks of
Megatron and DeepSpeed allocate their gradient buffers up front and count them at every moment.
The peak of a device is the larger of the step's and the optimizer step's: the latter holds
parameters, gradients and state (sharded as above, DDP's buckets included) plus the optimizer's
temporaries: foreach AdamW (torch's default on CUDA) allocates one fp32 buffer per parameter for
sqrt(v); on CPU it runs tensor by tensor and holds two of one tensor's size at a time, the
largest tensor's (``LayerCost.optimizer_transient_bytes``: 25 MB for an 8192 x 384 embedding).

FSDP traffic per step: ZeRO 0-2 all-gather the weights once and reduce-scatter the gradients once;
ZeRO-3 re-gathers for every micro-batch's forward and backward (2*m all-gathers). DDP all-reduces
the gradients once (no sync while accumulating).

Where each part lives::

    plan/training.py             TrainingConfig: batch, precision, optimizer, software stack
    plan/coefficients.py         LayerCost and layer_costs: one layer kind's coefficients
    plan/coefficient_sources.py  in-group measurements, software stack, sum of parts
    plan/groups.py               which groups cross nodes, one collective's time, DDP or FSDP
    plan/schedules.py            what a schedule is: rules, torch's order, micro-batches in flight, pipeline term
    plan/memory.py               workspace and pipeline buffers of a rank
    plan/cost.py                 evaluate: a complete layout's step time and memory, term by term
"""

from __future__ import annotations

import math

from autoplan.errors import InputError
from autoplan.plan.coefficient_sources import in_group_world
from autoplan.plan.coefficients import LayerCost, costs_for_layout
from autoplan.plan.memory import (boundary_crossings, chunk_sums, rank_backward_end_bytes, rank_pipeline_bytes,
                                  rank_transient_bytes)
from autoplan.plan.pipeline_costs import forward_shares, per_chunk_s, pipeline_costs_for, pipeline_relief, split_chunks
from autoplan.plan.plan import Layout, Prediction
from autoplan.plan.schedules import pipeline_s, shared_device_relief
from autoplan.plan.training import TrainingConfig
from autoplan.profile.formats import ClusterProfile, ModelProfile


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
    cpc = [0.0] * p
    p2p = [0.0] * p
    dps = [0.0] * p
    opt = [0.0] * p
    static = [0] * p
    opt_phase = [0] * p
    opt_transient = [0] * p
    act = [0] * p
    chunk_act = [[0.0] * v for _ in range(p)]
    chunk_s = [0.0] * (p * v)
    chunk_fwd = [0.0] * (p * v)          # the forward part of chunk_s (the shared-cores relief needs it)
    pipe = pipeline_costs_for(profile, cluster.world_size, p) if p > 1 and in_group_world(profile, cluster) else None
    if pipe is not None:
        share = forward_shares(profile, layout.mbs, cluster.world_size)
        forward_share_of = {info.name: share[info.kind] for info in profile.layers}
    for j, st in enumerate(layout.stages):
        r = j % p
        for n in st:
            c = costs[n]
            chunk_s[j] += c.per_microbatch_s
            if pipe is not None:
                chunk_fwd[j] += c.compute_s * forward_share_of[n] + (c.tp_comm_s + c.cp_comm_s) / 2
            comp[r] += c.compute_s
            reco[r] += c.recompute_s
            tpc[r] += c.tp_comm_s
            cpc[r] += c.cp_comm_s
            dps[r] += c.dp_sync_s
            opt[r] += c.optimizer_s
            static[r] += c.static_bytes
            opt_phase[r] += c.optimizer_phase_bytes
            opt_transient[r] = max(opt_transient[r], c.optimizer_transient_bytes)
            act[r] += c.act_bytes
            chunk_act[r][j // p] += c.act_bytes
    # every edge that crosses a chunk boundary b costs a send/recv on the sending chunk, once per
    # boundary it crosses
    for b, edges in enumerate(boundary_crossings(profile.edges, layout.stages)):
        for u, _ in edges:
            p2p[b % p] += costs[u].p2p_s
            chunk_s[b] += costs[u].p2p_s
            chunk_fwd[b] += costs[u].p2p_s / 2            # the activation out; the gradient back in backward
    if pipe is not None:
        # measured in groups: every chunk's actions and messages per micro-batch (pipeline_costs.py)
        per_chunk = per_chunk_s(pipe, layout) * cluster.calibration.comm_scale
        chunk_s = [c + per_chunk for c in chunk_s]
        p2p = [x + v * per_chunk for x in p2p]
    for r in range(p):
        tau[r] = comp[r] + reco[r] + tpc[r] + cpc[r] + p2p[r]
    rb = max(range(p), key=lambda r: (tau[r], -r))
    t_max = tau[rb]
    bubble = max(0.0, pipeline_s(tau, chunk_s, layout) - m * t_max)   # rounding can make it -1e-17
    busy, length = [m * t for t in tau], m * t_max + bubble
    relief = (shared_device_relief(cluster, busy, length) if pipe is None else
              pipeline_relief(pipe, *split_chunks(chunk_s, chunk_fwd, per_chunk), layout, length))
    comp, reco, tpc, cpc, p2p = ([x * relief for x in xs] for xs in (comp, reco, tpc, cpc, p2p))
    t_max, bubble = t_max * relief, bubble * relief
    if pipe is not None:
        bubble += pipe.per_step_s * cluster.calibration.compute_scale    # the schedule's per-step work
    dp_sync = max(dps)
    optimizer = max(opt)
    overhead = cluster.calibration.step_overhead_s
    step = m * t_max + bubble + dp_sync + optimizer + overhead
    extra = [w + cluster.calibration.memory_overhead_bytes for w in rank_transient_bytes(costs, layout, profile.edges)]
    peak_act, buf, unmade = rank_pipeline_bytes(layout, costs, profile.edges, chunk_act,
                                                chunk_sums(layout, costs, "late_grad_bytes"))
    end_ws = rank_backward_end_bytes(costs, layout)      # ZeRO-3's root units, activations gone
    end_mem = [static[r] + end_ws[r] + cluster.calibration.memory_overhead_bytes if end_ws[r] else 0 for r in range(p)]
    static = [static[r] - int(unmade[r]) for r in range(p)]     # at the peak moment
    step_mem = [static[r] + peak_act[r] + buf[r] + extra[r] for r in range(p)]
    opt_mem = [opt_phase[r] + opt_transient[r] + cluster.calibration.memory_overhead_bytes for r in range(p)]
    mem_f = [max(a, b, c) for a, b, c in zip(step_mem, opt_mem, end_mem)]
    mem = [int(math.ceil(x)) for x in mem_f]
    peak_r = max(range(p), key=lambda r: mem_f[r])
    breakdown = {
        "compute": m * comp[rb], "recompute": m * reco[rb], "tp_comm": m * tpc[rb],
        **({"cp_comm": m * cpc[rb]} if layout.cp > 1 else {}), "pp_p2p": m * p2p[rb],
        "bubble": bubble, "dp_sync": dp_sync, "optimizer": optimizer, "overhead": overhead,
    }
    memory_breakdown = {
        "params_grads_optimizer": static[peak_r],
        "activations": int(math.ceil(peak_act[peak_r])),
        "pipeline_buffers": int(math.ceil(buf[peak_r])), "workspace": extra[peak_r],
        "optimizer_step_peak": int(math.ceil(opt_mem[peak_r])),   # the peak when above the others' sum
        **({"backward_end_peak": int(math.ceil(end_mem[peak_r]))} if any(end_ws) else {}),   # likewise
    }
    fits = max(mem_f) <= cluster.device.memory_bytes * (1 + 1e-9)
    return Prediction(step_time_s=step, peak_memory_bytes=max(mem), breakdown_s=breakdown,
                      memory_per_stage_bytes=mem, memory_breakdown_bytes=memory_breakdown, fits=fits,
                      throughput_samples_per_s=train.global_batch / step if step > 0 else 0.0)
