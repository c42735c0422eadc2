"""Probes 20261207j: the stored runs judged with a pipeline's compute factor changed (exploratory ``--crude``; part 4's
``--kappa DIR``, PREREGISTRATION.md), beside main's.

    PYTHONPATH=. python docs/probes/20261207j/variant.py [--crude | --kappa /work/exp/s26/k [--corrected]]

Prints retro's summary on the 64 stored workloads (choice within 5% on the pooled in-turn medians, and on job 1;
mean error of the once-measured layouts), the misses, the trend T per world size (largest minus smallest micro-batch
of a pipeline family, log residual on the pooled in-turn medians) and 20261207i part 5's extra per slot.

- ``--crude``: a pipeline layout's compute factor f_c at the smallest profiled size, at every size;
- ``--kappa DIR``: f_c(m) * kappa(m)^w, kappa from part 4's measurements in DIR, w = min(1, (1 - 1/pp) / (1 - s0)),
  s0 the block stack's share of the whole model's in-group time at the smallest size.
"""
import collections
import json
import math
import os
import runpy
import statistics as st
import sys
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "20261205d"))
import autoplan.plan.coefficients as co   # noqa: E402
from autoplan.plan.coefficient_sources import composition_factors   # noqa: E402

MODE = "crude" if "--crude" in sys.argv else "kappa" if "--kappa" in sys.argv else "main"
CORRECTED = "--corrected" in sys.argv
"""kappa' (the amendment): the composition factors compared, not the scalings"""
KDIR = sys.argv[sys.argv.index("--kappa") + 1] if MODE == "kappa" else None
CURRENT: dict = {}
"""the workload being judged: {"kappa": {mbs: kappa}, "k0": blocks in the stack}"""
_shared = co._shared


def kappa_at(kap: dict[int, float], m: int) -> float:
    """kappa at ``m`` (the nearest measured size beyond the measured ones; log-linear between two)."""
    sizes = sorted(kap)
    if m <= sizes[0]:
        return kap[sizes[0]]
    if m >= sizes[-1]:
        return kap[sizes[-1]]
    lo = max(s for s in sizes if s <= m)
    hi = min(s for s in sizes if s >= m)
    if lo == hi:
        return kap[lo]
    t = (math.log(m) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return math.exp((1 - t) * math.log(kap[lo]) + t * math.log(kap[hi]))


def stack_share(profile, world: int, k0: int) -> float:
    from autoplan.plan.pipeline_costs import _unit_times
    m0 = min(g.mbs for g in profile.whole_model_timings)
    u = _unit_times(profile, world, m0)
    blocks = [t for info, t in zip(profile.layers, u.total_s) if info.kind == "block"]
    return sum(blocks[:k0]) / sum(u.total_s)


def corrected_kappa(profile, world: int) -> dict[int, float]:
    """kappa'(m) = rho(m) / rho(m0), rho(m) = (K m / W m) * (all layers / the stack's layers at m), the layers' in-group
    figures the stored profile's (the stack: blocks 2..k0+1 as part 4 timed them)."""
    got, k0 = CURRENT["raw"], CURRENT["k0"]
    rho = {}
    for m in got["sizes"]:
        t = [profile.kinds[i.kind].group_timing(m, world=world) for i in profile.layers]
        s = [g.forward_s + g.backward_s for g in t]
        blocks = [x for info, x in zip(profile.layers, s) if info.kind == "block"]
        rho[m] = (got[f"K{m}"] / got[f"W{m}"]) * (sum(s) / sum(blocks[1:1 + k0]))
    m0 = got["sizes"][0]
    return {m: r / rho[m0] for m, r in rho.items()}


def patched(profile, cluster, layout, train, mode):
    sh = _shared(profile, cluster, layout, train, mode)
    if MODE == "main" or layout.pp < 2 or not sh.world or not profile.whole_model_timings:
        return sh
    m0 = min(g.mbs for g in profile.whole_model_timings)
    if MODE == "crude":
        return replace(sh, f_compute=composition_factors(profile, sh.world, m0)[0])
    if not CURRENT:
        return sh
    if CORRECTED and "rho" not in CURRENT:
        CURRENT["kappa"] = corrected_kappa(profile, sh.world)
        CURRENT["rho"] = True
    s0 = stack_share(profile, sh.world, CURRENT["k0"])
    w = 1.0 if s0 >= 1 else min(1.0, (1 - 1 / layout.pp) / (1 - s0))
    return replace(sh, f_compute=sh.f_compute * kappa_at(CURRENT["kappa"], layout.mbs) ** w)


co._shared = patched
import retro   # noqa: E402
from retro import family, in_turn_residuals, stored_workloads   # noqa: E402

PATTERNS = ("/work/exp/s2*/d*/w*", "/work/exp/s23/shape*/w*")


def load_kappa(wl: str) -> bool:
    CURRENT.clear()
    if MODE != "kappa":
        return True
    path = os.path.join(KDIR, "_".join(wl.rstrip("/").split("/")[-2:]) + ".json")
    if not os.path.exists(path):
        return False
    got = json.load(open(path))
    sizes = got["sizes"]
    m0 = sizes[0]
    CURRENT.update(k0=got["k0"], raw=got, kappa={m: (got[f"K{m}"] / got[f"K{m0}"]) / (got[f"W{m}"] / got[f"W{m0}"])
                                        for m in sizes})
    return True


def main() -> None:
    wls = [w for w in sorted(w for p in PATTERNS for w in stored_workloads(p)) if load_kappa(w)]
    res = []
    trend = collections.defaultdict(list)
    for wl in wls:
        load_kappa(wl)
        res.append(retro.judge_workload(wl))
        if "/s23/shape" in wl:
            continue
        d, rows = in_turn_residuals(wl)
        fams = collections.defaultdict(dict)
        for L, x, _ in rows:
            if L.pp > 1:
                fams[family(L)][L.mbs] = x
        trend[d["workload"]["world"]] += [v[max(v)] - v[min(v)] for v in fams.values() if len(v) > 1]
    n, ok, ok1, err, miss = retro.summary(res)
    print(f"mode {MODE}{' corrected' if CORRECTED else ''}: n={n} within 5% pooled {ok}, job 1 {ok1}; mean error {err:.1%}; mean pooled miss {miss:+.2%}")
    for wl, ch, m, m1, e in res:
        if m > 0.05:
            print(f"  miss {wl[10:]:24s} pooled {m:+.1%} job1 {m1:+.1%} err {e:.1%} {ch}")
    for w, v in sorted(trend.items()):
        print(f"  T world {w}: {len(v)} families, mean {st.mean(v):+.3f}")
    if MODE == "crude":      # part 5's extra per slot under the variant (kappa needs the workload set per row)
        runpy.run_path(os.path.join(HERE, "..", "20261207i", "per_microbatch.py"), run_name="__main__")


if __name__ == "__main__":
    main()
