"""What this folder's scripts share: the stored workloads as read by ``docs/probes/20261207n/stored.py`` (each once),
from this folder's copies first, and the least-squares slope."""
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "20261207n"))
from stored import stored_files  # noqa: E402

GLOBS = ("docs/probes/20261207o/stored/*/runs.json", "docs/probes/**/*runs*.json")


def stored(key: str = "confirmed"):
    """(path, JSON) of each stored workload that has a non-empty ``key`` list (``confirmed``: the first in-turn job)."""
    return [(p, d) for p, d in stored_files(GLOBS) if d.get(key)]


def slope(points: list[tuple[float, float]]) -> float | None:
    """least-squares slope of y on x (None: fewer than two distinct x)"""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    mx, my = st.mean(xs), st.mean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)


def scores(layouts, predicted: list[float], measured: list[float]) -> dict:
    """How ``predicted`` step times meet ``measured`` ones of the same ``layouts``: mean |error| (``err``), the
    signed errors (``errors``), Spearman rank (``rho``), the least predicted one's step over the fastest measured
    less 1 (``miss``), the pipelines' slope of log error per doubling of mbs (``slope``, None where it has none)."""
    import math
    from autoplan.validate import spearman
    errors = [q / m - 1 for q, m in zip(predicted, measured)]
    pick = min(range(len(predicted)), key=predicted.__getitem__)
    return {"err": st.mean(abs(x) for x in errors), "errors": errors, "rho": spearman(predicted, measured),
            "miss": measured[pick] / min(measured) - 1,
            "slope": slope([(math.log2(L.mbs), math.log(q / m)) for L, q, m in zip(layouts, predicted, measured)
                            if L.pp > 1])}
