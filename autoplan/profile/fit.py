"""Fitting measured link times: the alpha-beta model ``t = latency_s + n / bandwidth_bytes_per_s``.

A pure function of (size, time) points, used by the link measurements (:mod:`autoplan.profile.links`)
and by the hardware catalogue (:mod:`autoplan.profile.hardware`) to turn points into a :class:`LinkFit`.

Run::

    python -c "from autoplan.profile.fit import fit_alpha_beta; print(fit_alpha_beta([1e3, 1e6], [1e-5, 1e-3]))"
"""

from __future__ import annotations

import math
from typing import Sequence

from autoplan.errors import InputError
from autoplan.profile.formats import LinkFit

MAX_BANDWIDTH_BYTES_PER_S = 1e14
"""upper clamp of a fitted bandwidth (100 TB/s, above any link or memory in the catalogue):
reached only when the times show no measurable dependence on the size"""


def _rel_sq_error(a: float, c: float, ns: Sequence[float], ts: Sequence[float]) -> float:
    return sum(((a + c * n - t) / t) ** 2 for n, t in zip(ns, ts))


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> LinkFit:
    """Fit ``t = latency_s + n / bandwidth_bytes_per_s`` to measured (size, time) points.

    Least squares on the RELATIVE error, sum(((a + c*n - t) / t)^2) with c = 1/bandwidth, so the
    small, latency-bound sizes weigh as much as the large, bandwidth-bound ones; subject to
    a >= 0 and c >= 1/MAX_BANDWIDTH_BYTES_PER_S.  A convex problem in two variables: the optimum
    is the unconstrained least-squares solution if feasible, else the best of the solutions on the
    boundary lines (a = 0, c = c_min) and their corner, all computed in closed form.
    ``residual_rel`` is the root-mean-square relative residual."""
    ns = [float(n) for n in sizes_bytes]
    ts = [float(t) for t in times_s]
    if len(ns) != len(ts) or len(ns) < 2:
        raise InputError(f"alpha-beta fit needs >= 2 (size, time) pairs of equal count, got {len(ns)} and {len(ts)}")
    if any(not math.isfinite(t) or t <= 0 for t in ts) or any(not math.isfinite(n) or n < 0 for n in ns):
        raise InputError("alpha-beta fit needs positive finite times and non-negative sizes")
    if len(set(ns)) < 2:
        raise InputError("alpha-beta fit needs at least two different sizes")
    c_min = 1.0 / MAX_BANDWIDTH_BYTES_PER_S
    # rows x_i = (1/t_i, n_i/t_i), target 1:  minimise sum (a*x_i0 + c*x_i1 - 1)^2
    x0 = [1.0 / t for t in ts]
    x1 = [n / t for n, t in zip(ns, ts)]
    s00 = sum(v * v for v in x0)
    s11 = sum(v * v for v in x1)
    s01 = sum(u * v for u, v in zip(x0, x1))
    b0, b1 = sum(x0), sum(x1)
    candidates: list[tuple[float, float]] = [(0.0, c_min)]
    det = s00 * s11 - s01 * s01
    if det > 0:
        candidates.append(((b0 * s11 - b1 * s01) / det, (b1 * s00 - b0 * s01) / det))
    if s11 > 0:
        candidates.append((0.0, b1 / s11))                       # on a = 0
    candidates.append(((b0 - c_min * s01) / s00, c_min))          # on c = c_min
    feasible = [(a, c) for a, c in candidates if a >= 0 and c >= c_min]
    a, c = min(feasible, key=lambda ac: _rel_sq_error(ac[0], ac[1], ns, ts))
    residual = math.sqrt(_rel_sq_error(a, c, ns, ts) / len(ns))
    return LinkFit(latency_s=a, bandwidth_bytes_per_s=1.0 / c, residual_rel=residual)
