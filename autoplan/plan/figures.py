"""A saved plan re-costed into the figures ``autoplan show`` draws (no drawing here).

The plan records the model and cluster it was made for (``training``); they are resolved again
(catalogue entries analytically, measured profiles from their files) and the plan's layout is
costed with the same functions as ``solve``, so the timeline and the memory bars are the cost
model's own numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from autoplan.plan.api import Problem
from autoplan.plan.coefficients import LayerCost, costs_for_layout
from autoplan.plan.cost import evaluate
from autoplan.plan.memory import chunk_sums, rank_pipeline_bytes, rank_transient_bytes
from autoplan.plan.plan import Layout, Plan, Prediction
from autoplan.plan.timeline import Timeline, per_rank_sums, step_timeline

MEMORY_PARTS = ("params_grads_optimizer", "activations", "pipeline_buffers", "workspace")
"""The stacked parts of a pipeline rank's memory (the keys of ``Prediction.memory_breakdown_bytes``)."""
LATER_PEAKS = {"optimizer_step_peak": "at the optimizer step",
               "backward_end_peak": "at the end of the backward (ZeRO-3's root unit reducing its gradients)"}
"""moments other than the activations' peak that can hold a device's most (``Prediction.memory_breakdown_bytes``)"""


@dataclass
class PlanFigures:
    problem: Problem
    layout: Layout
    predicted: Prediction
    """the layout re-costed now (equal to the plan's record unless a profile changed since)"""
    costs: dict[str, LayerCost]
    timeline: Timeline
    memory_by_rank_bytes: list[dict[str, int]]
    """per pipeline rank: the parts of :data:`MEMORY_PARTS`"""
    budget_bytes: int
    notes: list[str]

    def to_dict(self) -> dict:
        """The drawn data (``show --json``): layout, prediction, timeline bars, memory per rank."""
        tl = self.timeline
        return {"layout": self.layout.to_dict(), "predicted": self.predicted.to_dict(),
                "timeline": {"step_time_s": tl.step_time_s, "pipeline_s": tl.pipeline_s,
                             "model_pipeline_s": tl.model_pipeline_s, "bars": [asdict(b) for b in tl.bars]},
                "memory_by_rank_bytes": self.memory_by_rank_bytes, "budget_bytes": self.budget_bytes,
                "notes": self.notes}


def memory_by_rank(problem: Problem, layout: Layout, costs: dict[str, LayerCost]) -> list[dict[str, int]]:
    """Each pipeline rank's predicted peak memory split into :data:`MEMORY_PARTS`, with the same
    terms as :func:`autoplan.plan.cost.evaluate` (which keeps the split only for the peak rank)."""
    p = layout.pp
    (static,) = per_rank_sums(layout, costs, "static_bytes")
    acts, buf, unmade = rank_pipeline_bytes(layout, costs, problem.profile.edges, chunk_sums(layout, costs, "act_bytes"),
                                            chunk_sums(layout, costs, "late_grad_bytes"))
    extra = rank_transient_bytes(costs, layout, problem.profile.edges)
    overhead = problem.cluster.calibration.memory_overhead_bytes
    return [{"params_grads_optimizer": static[r] - int(unmade[r]), "activations": int(math.ceil(acts[r])),
             "pipeline_buffers": int(math.ceil(buf[r])), "workspace": extra[r] + overhead} for r in range(p)]


def plan_figures(plan: Plan, *, model: str | None = None, cluster: str | None = None,
                 memory_per_device_bytes: int | None = None, plan_path: Path | None = None) -> PlanFigures:
    """The plan re-costed on the problem it was made for (:meth:`Problem.from_plan`; ``model``,
    ``cluster`` and ``memory_per_device_bytes`` replace its record's)."""
    pb = Problem.from_plan(plan, model=model, cluster=cluster, memory_per_device_bytes=memory_per_device_bytes,
                           plan_path=plan_path)
    layout = plan.layout
    layout.check_against(pb.cluster.world_size, pb.profile.layer_names(), pb.train.global_batch)
    costs = costs_for_layout(pb.profile, pb.cluster, layout, pb.train)
    pred = evaluate(pb.profile, pb.cluster, layout, pb.train)
    notes = []
    recorded = plan.predicted.step_time_s
    if not math.isclose(pred.step_time_s, recorded, rel_tol=1e-6):
        notes.append(f"re-costed step time {pred.step_time_s * 1e3:.3f} ms differs from the plan's "
                     f"{recorded * 1e3:.3f} ms (a profile or its calibration changed since solve): drawing the re-costed one")
    by_rank = memory_by_rank(pb, layout, costs)
    drawn = max(sum(d.values()) for d in by_rank)
    if pred.peak_memory_bytes > drawn:
        moment = max(LATER_PEAKS, key=lambda k: pred.memory_breakdown_bytes.get(k, 0))
        notes.append(f"the peak, {pred.peak_memory_bytes / 2**20:.1f} MiB, comes {LATER_PEAKS[moment]}; the memory "
                     f"drawn is the activations' peak, {drawn / 2**20:.1f} MiB")
    tl = step_timeline(pb.profile, layout, costs, pred)
    diff = tl.schedule_difference_s
    if abs(diff) > 1e-9 * max(tl.model_pipeline_s, 1e-12):
        notes.append(f"the {layout.schedule} schedule simulated on these per-chunk costs takes "
                     f"{tl.pipeline_s * 1e3:.3f} ms, the cost model's pipeline term {tl.model_pipeline_s * 1e3:.3f} ms "
                     f"({diff / tl.model_pipeline_s * 100:+.2f}%)"
                     + (": the step is drawn past the prediction" if tl.exceeds_prediction else
                        ": the difference is drawn as model margin"))
    return PlanFigures(problem=pb, layout=layout, predicted=pred, costs=costs, timeline=tl,
                       memory_by_rank_bytes=by_rank,
                       budget_bytes=pb.cluster.device.memory_bytes, notes=notes)
