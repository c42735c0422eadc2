"""Why this layout: the chosen plan beside the best of each other family, and the cost term that
makes each one lose."""

from __future__ import annotations

from dataclasses import replace

from autoplan.errors import InfeasibleError, LayoutError
from autoplan.plan.training import TrainingConfig
from autoplan.plan.plan import COST_TERMS, Alternative, Plan, Prediction
from autoplan.plan.presets import DATA_PARALLEL_FIELDS
from autoplan.plan.search import Candidate, SearchOptions, search
from autoplan.profile.formats import ClusterProfile, ModelProfile

# name -> layout fields that define the family
FAMILIES: dict[str, dict] = {
    "best without pipeline parallel": {"pp": 1},
    "best without tensor parallel": {"tp": 1},
    "pure data parallel (DDP)": DATA_PARALLEL_FIELDS["ddp"],
    "ZeRO-3 / FSDP": DATA_PARALLEL_FIELDS["zero3"],
}


def loses_on(chosen: Prediction, alt: Prediction, memory_bytes: int) -> str:
    """The term that costs ``alt`` the most against ``chosen`` (or memory, if it does not fit)."""
    if not alt.fits:
        return f"memory: needs {alt.peak_memory_bytes / 2**20:.1f} MiB > {memory_bytes / 2**20:.1f} MiB per device"
    diffs = {t: alt.breakdown_s.get(t, 0.0) - chosen.breakdown_s.get(t, 0.0) for t in COST_TERMS}
    term = max(diffs, key=lambda t: diffs[t])
    if diffs[term] <= 0:
        return "ties (same predicted time)"
    return f"{term} (+{diffs[term] * 1e3:.3g} ms)"


def _in_family(c: Candidate, fields: dict) -> bool:
    return all(getattr(c.layout, k) == v for k, v in fields.items())


def family_alternatives(profile: ModelProfile, cluster: ClusterProfile, train: TrainingConfig, opts: SearchOptions,
                        chosen: Candidate, best: list[Candidate]) -> list[Alternative]:
    """Runner-ups first, then the best layout of each family the chosen one is not in."""
    mem = cluster.device.memory_bytes
    out = [Alternative(c.layout, c.predicted, family=f"runner-up {i}", loses_on=loses_on(chosen.predicted, c.predicted, mem))
           for i, c in enumerate(best[1:], start=1)]
    if chosen.layout.lossy:   # what the lossy option buys: the best exact layout beside it
        try:
            exact = search(profile, cluster, train, replace(opts, allow_lossy=(), top_k=1)).best[0]
            out.append(Alternative(exact.layout, exact.predicted, family="best exact layout",
                                   loses_on=loses_on(chosen.predicted, exact.predicted, mem)))
        except (InfeasibleError, LayoutError):
            pass
    for name, fields in FAMILIES.items():
        if _in_family(chosen, fields):
            continue
        if any(opts.fixed.get(k, v) != v for k, v in fields.items()):
            continue     # the user's constraints exclude this family
        fam_opts = replace(opts, fixed={**opts.fixed, **fields}, top_k=1)
        try:
            c = search(profile, cluster, train, fam_opts).best[0]
        except InfeasibleError as e:
            pred = Prediction(step_time_s=float("inf"), peak_memory_bytes=e.min_memory_bytes or 0, breakdown_s={},
                              fits=False)
            out.append(Alternative(e.smallest_layout, pred, family=name,
                                   loses_on=loses_on(chosen.predicted, pred, mem)))
            continue
        except LayoutError:
            continue
        out.append(Alternative(c.layout, c.predicted, family=name, loses_on=loses_on(chosen.predicted, c.predicted, mem)))
    return out


def explain(plan: Plan) -> list[str]:
    """Plain-text lines: the choice, its cost terms, and each family's best with why it loses."""
    p = plan.predicted
    lines = [f"chosen: {plan.layout.short()}  step {p.step_time_s * 1e3:.2f} ms, "
             f"peak memory {p.peak_memory_bytes / 2**20:.1f} MiB per device"]
    if plan.layout.lossy:
        lines.append("LOSSY (allowed with --allow-lossy): " + plan.layout.lossy_note())
    terms = sorted(((v, k) for k, v in p.breakdown_s.items() if v > 0), reverse=True)
    if terms:
        lines.append("time goes to: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for v, k in terms))
    if plan.layout.lossy:
        exact = next((a for a in plan.alternatives if a.family == "best exact layout"), None)
        if exact is not None:
            lines.append(f"best exact layout: {exact.layout.short()}  {exact.predicted.step_time_s * 1e3:.2f} ms")
    for a in plan.alternatives:
        if a.family == "best exact layout":
            continue
        t = "does not fit" if not a.predicted.fits else f"{a.predicted.step_time_s * 1e3:.2f} ms"
        lines.append(f"{a.family}: {a.layout.short()}  {t}; loses on {a.loses_on}")
    return lines


CLOSE_CALL_FRACTION = 0.05
"""Layouts predicted within this fraction of the chosen one's step time are a close call: on this project's
CPU fidelity runs (docs/fidelity.md, 2026-12-04: 368 layouts of 50 workloads) a layout's predicted / measured ratio
lay within -5.3% / +5.1% of its workload's median for 80% of layouts, and of the nine misses of the model's choice by
more than 5% in the seed logs since 7cf2ef2, seven were against a layout predicted 0.5-3.8% from the chosen one
(two at 9.4% and 15.4%; docs/probes/20261205b/misses.out)."""


def close_calls(plan: Plan, within: float = CLOSE_CALL_FRACTION) -> list[Alternative]:
    """The plan's alternatives that fit and are predicted within ``within`` of its step time (slower or not
    faster: the chosen one has the least predicted time among those searched), closest first."""
    t = plan.predicted.step_time_s
    near = [a for a in plan.alternatives
            if a.predicted.fits and a.layout != plan.layout and a.predicted.step_time_s <= t * (1.0 + within)]
    return sorted(near, key=lambda a: a.predicted.step_time_s)


def close_call_summary(plan: Plan, near: list[Alternative]) -> str:
    """One sentence on ``near``, the plan's :func:`close_calls` (not empty)."""
    gap = (near[-1].predicted.step_time_s / plan.predicted.step_time_s - 1.0) * 100
    return (f"{len(near)} other layout{'s' if len(near) > 1 else ''} predicted within {gap:.1f}% of this one, inside "
            f"the cost model's error (on measured CPU runs 80% of layouts within {CLOSE_CALL_FRACTION:.0%} of their "
            f"workload's median; docs/fidelity.md)")
