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


def transient_bytes(costs: dict[str, LayerCost], layout: Layout, without: Collection[str] = ()) -> int:
    """Per-device workspace independent of placement: the ZeRO-3 gather buffer (two layers'
    weights, for prefetch), one layer's unsharded gradient before its reduce-scatter (FSDP without
    accumulation), the new gradient of a layer that backward allocates before adding it to the
    accumulated one (gradient accumulation: the largest layer's, measured 12 MiB on an embedding of
    8192 x 384 in fp32), the full-recompute workspace (one layer's activations), the selective
    one (the part of one layer's activations that its backward recomputes) and the gradient of the
    largest output among the layers but ``without`` (the model's outputs, on every pipeline rank
    but the last: :func:`rank_transient_bytes`; for the logits, the loss's gradients)."""
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
    # gradient (the loss's two fp32 gradients for the logits under autoplan's executor,
    # LayerCost.backward_transient_bytes): the largest, on the rank that computes it, bounds that
    extra += max((max(c.out_bytes, c.backward_transient_bytes) for n, c in costs.items() if n not in without),
                 default=0)
    extra += max(c.fp8_workspace_bytes for c in costs.values())     # fp8: one layer's cast weights
    return extra


def rank_transient_bytes(costs: dict[str, LayerCost], layout: Layout, edges: list[tuple[str, str]]) -> list[int]:
    """:func:`transient_bytes` of each pipeline rank: the model's outputs (the logits) are the last
    rank's (the last chunk ends with them), so the other ranks' largest output gradient is their
    layers' (the solver takes this rule too, whatever the placement)."""
    outputs = model_outputs(list(costs), edges)
    others = transient_bytes(costs, layout, without=outputs)
    return [others] * (layout.pp - 1) + [transient_bytes(costs, layout)]


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
