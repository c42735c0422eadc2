"""The micro-batch-size slope as a one-parameter correction, fitted leave-one-source-out: would it move the
model's choice on workloads it was not fitted to? A source is one seed's draw (20261205's two runs are one).

For each held-out source: beta = least-squares slope of the centred residual log(pooled measured /
predicted) on log2(mbs), over the other sources' layouts; the held-out workloads' predictions become
pred * 2**(beta * log2(mbs)) (nothing else changes); the pick is judged on the pooled in-turn medians.
In-sample (beta fitted on all sources) is printed beside it.

    python docs/probes/20261205e/loso.py
"""
import math, os, re, statistics as st, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
import retro
from autoplan.plan.plan import Layout
from autoplan.plan.api import estimate_problem

rows = []   # (source, workload, {key: (pred_s, mbs)}, pool)
for wl in retro.stored_workloads('/work/exp/s1*/d*/w*'):
    once, pool, pb = retro.judged(wl)
    pred = {}
    for k, r in once.items():
        lay = Layout.from_dict(r["layout"])
        pred[k] = (estimate_problem(pb, lay)[1].step_time_s, lay.mbs)
    rows.append((re.search(r"/d(\d+)/", wl).group(1), wl, pred, pool))


def slope(train):
    xs, ys = [], []
    for _, _, pred, pool in train:
        pts = [(math.log2(m), math.log(pool[k] / p)) for k, (p, m) in pred.items() if k in pool]
        cx, cy = st.mean(x for x, _ in pts), st.mean(y for _, y in pts)
        xs += [x - cx for x, _ in pts]
        ys += [y - cy for _, y in pts]
    return sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)


def miss(pred, pool, beta):
    adj = {k: p * 2 ** (beta * math.log2(m)) for k, (p, m) in pred.items()}
    ch = min(adj, key=adj.get)
    return pool[ch] / min(pool.values()) - 1 if ch in pool else float("nan")


sources = sorted({s for s, *_ in rows})
beta_all = slope(rows)
out = {"none": [], "in-sample": [], "leave-one-source-out": []}
for s in sources:
    beta = slope([r for r in rows if r[0] != s])
    for src, wl, pred, pool in rows:
        if src != s:
            continue
        out["none"].append(miss(pred, pool, 0.0))
        out["in-sample"].append(miss(pred, pool, beta_all))
        out["leave-one-source-out"].append(miss(pred, pool, beta))
    print(f"source {s}: beta fitted without it {beta:+.4f} per doubling")
print(f"beta on all sources {beta_all:+.4f} per doubling")
for arm, m in out.items():
    print(f"{arm:22s} within 5% pooled on {sum(1 for x in m if x <= 0.05)} of {len(m)}; mean miss {st.mean(x for x in m if x == x):+.2%}")
