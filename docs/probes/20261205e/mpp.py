"""Pipelines with fewer micro-batches than stages (m < pp, never timed by the profile): are they priced
worse than the rest, and what would leaving them out of the model's pick do? And interleaved layouts whose
micro-batch count is not a multiple of pp (torch runs them in one round of m) against the rest. Residual:
log(pooled measured / predicted), centred per workload. Over the stored workloads.

    python docs/probes/20261205e/mpp.py '/work/exp/s1*/d*/w*'
"""
import math, os, statistics as st, sys, collections
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '20261205d'))
import retro
from autoplan.plan.plan import Layout
from autoplan.plan.api import estimate_problem

groups = collections.defaultdict(list)
rounds = collections.defaultdict(list)
picks = {"all": [], "m>=pp": []}
for wl in sorted(w for a in sys.argv[1:] for w in retro.stored_workloads(a)):
    once, pool, pb = retro.judged(wl)
    pred = {}
    for k, r in once.items():
        lay = Layout.from_dict(r["layout"])
        pred[k] = (estimate_problem(pb, lay)[1].step_time_s, lay)
    # residual log(pooled measured / predicted), centred per workload, by m against pp
    res = {k: math.log(pool[k] / p) for k, (p, _) in pred.items() if k in pool}
    c = st.mean(res.values())
    for k, x in res.items():
        lay = pred[k][1]
        cls = "no pp" if lay.pp == 1 else ("m<pp" if lay.num_microbatches < lay.pp else
                                           "m=pp" if lay.num_microbatches == lay.pp else "m>pp")
        groups[(cls, lay.schedule if lay.pp > 1 else "-")].append(x - c)
        if lay.pp > 1:
            fam = "interleaved" if lay.schedule == "interleaved" else "1f1b/gpipe"
            split = "m%pp!=0" if lay.num_microbatches % lay.pp else "m%pp==0"
            rounds[(fam, split)].append(x - c)
            if lay.schedule == "interleaved":
                rounds[(fam, split, f"vp{lay.vp}")].append(x - c)
    for arm, keep in (("all", lambda lay: True), ("m>=pp", lambda lay: lay.pp == 1 or lay.num_microbatches >= lay.pp)):
        cands = {k: v for k, v in pred.items() if keep(v[1])}
        ch = min(cands, key=lambda k: cands[k][0])
        miss = pool[ch] / min(pool.values()) - 1 if ch in pool else float("nan")
        picks[arm].append(miss)
        print(f"{wl[-18:]:18s} {arm:6s} pick pooled {miss:+6.1%}  {ch}")
for k, v in sorted(groups.items()):
    print(f"residual {k}: n={len(v)} mean {st.mean(v):+.3f} sd {st.pstdev(v):.3f}")
for k, v in sorted(rounds.items()):
    print(f"residual {k}: n={len(v)} mean {st.mean(v):+.3f} sd {st.pstdev(v):.3f}")
for arm, m in picks.items():
    print(f"pick {arm}: within 5% pooled on {sum(1 for x in m if x <= 0.05)} of {len(m)}")
