"""Per-rank memory that does not belong to one layer: the workspace every device needs whatever the
placement, and the pipeline memory of the tensors that cross chunk boundaries: receive buffers in
transit (:func:`rank_buffer_bytes`) and the outputs a chunk keeps per in-flight micro-batch
(:func:`chunk_held_bytes`), both together a rank's ``pipeline_buffers`` (:func:`rank_pipeline_bytes`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from autoplan.plan.coefficients import LayerCost
from autoplan.plan.groups import data_parallel_wrapper
from autoplan.plan.plan import Layout
from autoplan.plan.schedules import peak_inflight_bytes
from autoplan.profile.formats import model_outputs


def transient_bytes(costs: dict[str, LayerCost], layout: Layout, without: Collection[str] = (),
                    root_bytes: int | None = None) -> int:
    """Per-device workspace independent of placement: ZeRO-3's gathered weights, one layer's
    unsharded gradient before its reduce-scatter (FSDP without accumulation), the new gradient of a
    layer that backward allocates before adding it to the accumulated one (gradient accumulation:
    the largest layer's, measured 12 MiB on an embedding of 8192 x 384 in fp32), the full-recompute
    workspace (one layer's activations), the selective one (the part of one layer's activations that
    its backward recomputes) and the gradient of the largest output among the layers but ``without``
    (the model's outputs, on every pipeline rank but the last: :func:`rank_transient_bytes`; for the
    logits, the loss's gradients).

    ZeRO-3 under autoplan's executor follows FSDP2's units (``LayerCost.fsdp_unit``): the root unit
    (``root_bytes``; None: every root layer in ``costs``) stays gathered from its forward to the end
    of the backward (FSDP2 does not reshard a root after forward), and in a block's backward that
    block and the one prefetched are gathered beside its unsharded gradient: root + 3 x the largest
    block. Other stacks' ZeRO-3: two layers' weights (prefetch) and one gradient, the largest layer's.
    The root's own reduce-scatter at the end of the backward is a moment of its own,
    :func:`rank_backward_end_bytes`."""
    extra = 0
    _, fsdp = data_parallel_wrapper(layout)
    largest = max(c.weight_bytes_unsharded for c in costs.values())
    if any(c.fsdp_unit for c in costs.values()):
        block = max((c.weight_bytes_unsharded for c in costs.values() if c.fsdp_unit == "block"), default=0)
        extra += (fsdp_root_bytes(costs) if root_bytes is None else root_bytes) + 3 * block
    else:
        if fsdp and layout.zero == 3:
            extra += 2 * largest
        if fsdp or layout.num_microbatches > 1:
            extra += largest   # gradient bytes ~ weight bytes
    if layout.recompute == "full" or "full" in layout.recompute_layers.values():
        extra += max(c.full_act_bytes for c in costs.values())
    recomputed = [max(0, c.full_act_bytes - c.act_bytes) for n, c in costs.items()
                  if layout.recompute_of(n) == "selective"]
    if recomputed:
        extra += max(recomputed)
    # backward holds the gradient of a layer's output while it computes the layer's input
    # gradient (the loss's two fp32 gradients for the logits under autoplan's executor,
    # LayerCost.backward_transient_bytes): the largest, on the rank that computes it, bounds that
    extra += max((max(c.out_bytes, c.backward_transient_bytes) for n, c in costs.items() if n not in without),
                 default=0)
    extra += max(c.fp8_workspace_bytes for c in costs.values())     # fp8: one layer's cast weights
    return extra


def fsdp_root_bytes(costs: dict[str, LayerCost], names: Collection[str] | None = None) -> int:
    """Gathered bytes of the FSDP2 root unit made of the layers ``names`` (None: all of ``costs``):
    its layers that are not blocks (``LayerCost.fsdp_unit`` "root"; 0 but at ZeRO-3 under autoplan's executor)."""
    layers = costs.values() if names is None else (costs[n] for n in names)
    return sum(c.weight_bytes_unsharded for c in layers if c.fsdp_unit == "root")


def rank_root_bytes(costs: dict[str, LayerCost], layout: Layout) -> list[int]:
    """:func:`fsdp_root_bytes` of each pipeline rank: the roots of its local chunks (each chunk's
    module is a ``fully_shard`` root of its own)."""
    out = [0] * layout.pp
    for j, st in enumerate(layout.stages):
        out[j % layout.pp] += fsdp_root_bytes(costs, st)
    return out


ROOT_END_COPIES = 4
"""what a ZeRO-3 root unit holds at its reduce-scatter, at the end of the backward, in its own
gathered bytes: its parameters (FSDP2 reshards them after the reduce-scatter), their unsharded
gradients and two flat buffers of the unit's size for the reduce-scatter (its input and a copy):
with the live-tensor tracker at dp 4 on CPU (docs/probes/20261206e/mem_phases.py) the peak held the
parameters, both flat buffers and one of the two layers' gradients, 3.5 x; 4 counts both"""


def rank_backward_end_bytes(costs: dict[str, LayerCost], layout: Layout) -> list[int]:
    """Per pipeline rank, the workspace at the end of its backward beyond its state with every
    gradient made, when the activations are gone: ZeRO-3's root units reducing their gradients
    under autoplan's executor (:data:`ROOT_END_COPIES` x their gathered bytes); 0 elsewhere."""
    return [ROOT_END_COPIES * r for r in rank_root_bytes(costs, layout)]


def rank_transient_bytes(costs: dict[str, LayerCost], layout: Layout, edges: list[tuple[str, str]]) -> list[int]:
    """:func:`transient_bytes` of each pipeline rank: the model's outputs (the logits) are the last
    rank's (the last chunk ends with them), so the other ranks' largest output gradient is their
    layers' (the solver takes this rule too, whatever the placement); ZeRO-3's root unit is the
    rank's own (:func:`rank_root_bytes`; the solver takes every root layer's)."""
    outputs = model_outputs(list(costs), edges)
    # the root unit adds its bytes as they are: two evaluations serve every rank
    others, last = (transient_bytes(costs, layout, without=w, root_bytes=0) for w in (outputs, ()))
    roots = rank_root_bytes(costs, layout)
    return [(others if r < layout.pp - 1 else last) + roots[r] for r in range(layout.pp)]


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
    """Pipeline receive buffers in transit on each pipeline rank: every edge crossing boundary b
    (from :func:`boundary_crossings`) holds its ``buffer_bytes`` on the sending chunk's rank (the
    gradient) and on the receiving chunk's rank (the activation)."""
    buf = [0] * pp
    for b, edges in enumerate(crossings):
        for u, _ in edges:
            buf[b % pp] += costs[u].buffer_bytes
            buf[(b + 1) % pp] += costs[u].buffer_bytes
    return buf


def chunk_held_bytes(crossings: list[list[tuple[str, str]]], stages: list[list[str]], costs: dict[str, LayerCost],
                     outputs: Sequence[str]) -> list[float]:
    """Per chunk j, the outputs it keeps per in-flight micro-batch beyond its activations
    (``LayerCost.held_out_bytes``): every tensor it sends across boundary j, and on the last chunk
    of a pipeline the model's ``outputs`` it holds (the logits). Without a pipeline: nothing."""
    held = [0.0] * len(stages)
    if len(stages) < 2:
        return held
    for b, edges in enumerate(crossings):
        held[b] += sum(costs[u].held_out_bytes for u, _ in edges)
    held[-1] += sum(costs[n].held_out_bytes for n in outputs if n in set(stages[-1]))
    return held


def rank_pipeline_bytes(layout: Layout, costs: dict[str, LayerCost], edges: list[tuple[str, str]],
                        chunk_act: list[list[float]], chunk_late_grads: list[list[float]] | None = None,
                        ) -> tuple[list[float], list[float], list[float]]:
    """Per pipeline rank, at its peak moment (:func:`autoplan.plan.schedules.peak_moments`):
    (activations, pipeline buffers, gradients not made yet), where ``chunk_act[r][i]`` are the
    activations per micro-batch of rank r's local chunk i, ``chunk_late_grads[r][i]`` the gradients
    its first backward makes (``LayerCost.late_grad_bytes``; None: all there from the start), the
    buffers the receive buffers in transit plus the outputs its chunks keep for their in-flight
    micro-batches, and the last part is what the rank's ``static_bytes`` hold beyond that moment."""
    p = layout.pp
    crossings = boundary_crossings(edges, layout.stages)
    held = chunk_held_bytes(crossings, layout.stages, costs, model_outputs(list(costs), edges))
    buf = rank_buffer_bytes(crossings, costs, p)
    acts, pipes, unmade = [], [], []
    for r in range(p):
        a, h, u = peak_inflight_bytes(layout, r, chunk_act[r], [held[r + i * p] for i in range(layout.vp)],
                                      chunk_late_grads[r] if chunk_late_grads is not None else None)
        acts.append(a)
        pipes.append(buf[r] + h)
        unmade.append(u)
    return acts, pipes, unmade


def chunk_sums(layout: Layout, costs: dict[str, LayerCost], attr: str) -> list[list[float]]:
    """``attr`` summed over each local chunk of each pipeline rank: ``out[r][i]`` for chunk ``r + i*pp``."""
    out = [[0.0] * layout.vp for _ in range(layout.pp)]
    for j, st in enumerate(layout.stages):
        out[j % layout.pp][j // layout.pp] += sum(getattr(costs[n], attr) for n in st)
    return out
