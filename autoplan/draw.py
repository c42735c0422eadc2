"""Pictures of a plan and of a validation run (matplotlib, imported only here and only when drawing).

- :func:`draw_plan`: the step timeline of every pipeline rank (from :mod:`autoplan.plan.timeline`) above
  the predicted memory of each pipeline rank as stacked bars against the device budget;
- :func:`draw_validation`: predicted against measured step time and peak memory for each layout run.

Both write PNG or SVG (by the file's suffix) and return the figure, whose artists carry the drawn
data (each timeline row is one ``broken_barh`` collection per bar kind, ``gid`` ``"rank R:KIND"``) so
tests can check what was drawn.
"""

from __future__ import annotations

from pathlib import Path

from autoplan.errors import InputError

KIND_STYLE = {
    "forward": ("#4C78A8", "forward"),
    "recompute": ("#F58518", "recompute"),
    "backward": ("#54A24B", "backward"),
    "p2p": ("#9D755D", "pipeline send/recv"),
    "bubble": ("#E45756", "bubble (idle)"),
    "model_margin": ("#FF9DA6", "cost model's bubble beyond the schedule"),
    "dp_sync": ("#B279A2", "data-parallel sync"),
    "optimizer": ("#72B7B2", "optimizer"),
    "wait": ("#D8D8D8", "waiting for the slowest rank"),
    "overhead": ("#444444", "per-step overhead (calibrated)"),
}
MEMORY_STYLE = {
    "params_grads_optimizer": ("#4C78A8", "params + grads + optimizer state"),
    "activations": ("#54A24B", "activations"),
    "pipeline_buffers": ("#9D755D", "pipeline buffers"),
    "workspace": ("#F58518", "workspace"),
}
FORMATS = (".png", ".svg")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("drawing needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def check_out_path(out: Path) -> None:
    if Path(out).suffix.lower() not in FORMATS:
        raise InputError(f"--out must end in .png or .svg, got {out}")


def _save(fig, out: Path) -> None:
    """Write via a temporary file in the same folder, then rename: no half-written picture."""
    import os
    import tempfile
    out = Path(out)
    fd, tmp = tempfile.mkstemp(dir=out.parent if str(out.parent) else ".", prefix=f".{out.name}.", suffix=out.suffix)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=130, bbox_inches="tight")
        os.chmod(tmp, 0o644)          # mkstemp makes 0600; a picture is meant to be shared
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _time_unit(seconds: float) -> tuple[float, str]:
    return (1.0, "s") if seconds >= 2 else (1e3, "ms")


def draw_plan(figures, out: Path, *, title: str = ""):
    """The timeline and memory of :class:`autoplan.plan.figures.PlanFigures`, written to ``out``."""
    check_out_path(out)
    plt = _pyplot()
    tl, lay = figures.timeline, figures.layout
    p = lay.pp
    scale, unit = _time_unit(tl.step_time_s)
    fig, (ax_t, ax_m) = plt.subplots(2, 1, figsize=(12, 3.2 + 0.45 * p + 2.8),
                                     gridspec_kw={"height_ratios": [1.0 + 0.35 * p, 2.6]})
    used = set()
    for r in range(p):
        by_kind: dict[str, list[tuple[float, float]]] = {}
        for b in tl.rank_bars(r):
            by_kind.setdefault(b.kind, []).append((b.start_s * scale, b.duration_s * scale))
        for kind, spans in by_kind.items():
            color, label = KIND_STYLE[kind]
            coll = ax_t.broken_barh(spans, (r - 0.4, 0.8), facecolors=color, edgecolor="white" if len(spans) < 200 else "none",
                                    linewidth=0.3, label=label if kind not in used else None)
            coll.set_gid(f"rank {r}:{kind}")
            used.add(kind)
    # micro-batch numbers where the bars are wide enough to read
    fwd = [b for b in tl.bars if b.kind == "forward"]
    if fwd and len(fwd) <= 64:
        for b in fwd:
            ax_t.text((b.start_s + b.duration_s / 2) * scale, b.rank, str(b.microbatch), ha="center", va="center",
                      fontsize=7, color="white")
    pred = tl.predicted_step_time_s * scale
    ax_t.axvline(pred, color="black", linestyle="--", linewidth=1)
    ax_t.text(pred, -0.75, f" predicted step {pred:.3g} {unit}", va="bottom", ha="right" if tl.exceeds_prediction else "left",
              fontsize=8)
    ax_t.set_yticks(range(p), [f"pp rank {r}" for r in range(p)])
    ax_t.set_ylim(p - 0.5, -0.9)
    ax_t.set_xlim(0, max(tl.step_time_s, tl.predicted_step_time_s) * scale * 1.01)
    ax_t.set_xlabel(f"time ({unit})")
    sched = lay.schedule if p > 1 else "no pipeline"
    ax_t.set_title(title or f"{lay.short()}: one step ({sched}, {lay.num_microbatches} micro-batches)", fontsize=10)
    ax_t.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.02 * (6 - min(p, 6))), ncol=5, fontsize=8,
                frameon=False)
    _draw_memory(ax_m, figures.memory_by_rank_bytes, figures.budget_bytes)
    fig.tight_layout()
    _save(fig, out)
    return fig


def _bytes_unit(n: float) -> tuple[float, str]:
    return (2**-30, "GiB") if n >= 2**30 else (2**-20, "MiB")


def _draw_memory(ax, by_rank: list[dict[str, int]], budget_bytes: int) -> None:
    top = max([sum(d.values()) for d in by_rank] + [budget_bytes])
    scale, unit = _bytes_unit(top)
    ranks = range(len(by_rank))
    bottom = [0.0] * len(by_rank)
    for part, (color, label) in MEMORY_STYLE.items():
        vals = [d.get(part, 0) * scale for d in by_rank]
        bars = ax.barh(list(ranks), vals, left=bottom, color=color, height=0.6, label=label)
        for r, patch in zip(ranks, bars.patches):
            patch.set_gid(f"memory rank {r}:{part}")
        bottom = [a + v for a, v in zip(bottom, vals)]
    ax.axvline(budget_bytes * scale, color="black", linestyle="--", linewidth=1)
    ax.text(budget_bytes * scale, -0.6, f" budget {budget_bytes * scale:.3g} {unit}", va="bottom", ha="right",
            fontsize=8)
    for r, total in zip(ranks, bottom):
        ax.text(total, r, f" {total:.3g}", va="center", fontsize=8)
    ax.set_yticks(list(ranks), [f"pp rank {r}" for r in ranks])
    ax.set_ylim(len(by_rank) - 0.5, -0.9)
    ax.set_xlim(0, top * scale * 1.12)
    ax.set_xlabel(f"predicted peak memory per device ({unit})")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, fontsize=8, frameon=False)


def draw_validation(runs, out: Path, *, title: str = "", budget_bytes: int | None = None):
    """Predicted against measured step time and peak memory of each run (:class:`autoplan.validate.Run`),
    with the device memory budget when given."""
    check_out_path(out)
    plt = _pyplot()
    rows = [r for r in runs if r.measured is not None]
    if not rows:
        raise InputError("no layout was measured: nothing to plot")
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 1.2 + 0.55 * len(rows) + 1.5))
    labels = [("chosen: " if r is runs[0] else "") + r.layout.short() for r in rows]
    y = list(range(len(rows)))
    h = 0.38
    t_scale, t_unit = _time_unit(max(max(r.predicted.step_time_s, r.measured.step_time_s) for r in rows))
    ax_t.barh([v - h / 2 for v in y], [r.predicted.step_time_s * t_scale for r in rows], height=h, color="#4C78A8",
              label="predicted")
    ax_t.barh([v + h / 2 for v in y], [r.measured.step_time_s * t_scale for r in rows], height=h, color="#F58518",
              label="measured (median)")
    for v, r in zip(y, rows):
        err = (r.predicted.step_time_s - r.measured.step_time_s) / r.measured.step_time_s * 100
        ax_t.text(max(r.predicted.step_time_s, r.measured.step_time_s) * t_scale, v, f" predicted {err:+.0f}%",
                  va="center", fontsize=8)
    ax_t.set_yticks(y, labels, fontsize=8)
    ax_t.invert_yaxis()
    ax_t.set_xlabel(f"step time ({t_unit})")
    ax_t.set_xlim(0, max(max(r.predicted.step_time_s, r.measured.step_time_s) for r in rows) * t_scale * 1.25)
    ax_t.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    top = max(max(r.predicted.peak_memory_bytes, r.measured.peak_memory_bytes) for r in rows)
    m_scale, m_unit = _bytes_unit(max(top, budget_bytes or 0))
    ax_m.barh([v - h / 2 for v in y], [r.predicted.peak_memory_bytes * m_scale for r in rows], height=h,
              color="#4C78A8", label="predicted")
    ax_m.barh([v + h / 2 for v in y], [r.measured.peak_memory_bytes * m_scale for r in rows], height=h,
              color="#F58518", label="measured (largest rank)")
    if budget_bytes:
        ax_m.axvline(budget_bytes * m_scale, color="black", linestyle="--", linewidth=1, label="budget")
    ax_m.set_yticks(y, [""] * len(rows))
    ax_m.invert_yaxis()
    ax_m.set_xlabel(f"peak memory per device ({m_unit})")
    ax_m.set_xlim(0, max(top, budget_bytes or 0) * m_scale * 1.1)
    ax_m.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    fig.suptitle(title or "predicted against measured", fontsize=10)
    fig.tight_layout()
    _save(fig, out)
    return fig
