"""How accurate must the model be for issue 24's first line, given how precisely the harness measures?

    python docs/probes/20261206d/needed.py '/work/exp/s2*/d*/w*'

From the stored fidelity workloads: the layouts' pooled in-turn medians (both jobs) stand for their true
step times T; the model's per-layout error sd (log predicted / pooled, less its workload's mean) is read off
the stored predictions. Then a Monte Carlo: the judge measures each layout once in turn, T * exp(e), e ~ N(0,
s_judge) (s_judge: the bootstrap sd of one 12-step in-turn median, read off the stored steps); a model with
per-layout error sd s predicts T * exp(d), d ~ N(0, s), and picks its fastest; the pick passes where its
measured time is within 5% of the fastest measured. Printed: the share of workloads that pass, and the
chance that 6 of 6 pass on each of three seeds."""
import glob, math, os, random, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import key, load_runs, pooled   # noqa: E402


def in_turn_median_sds(runs, rng):
    """The bootstrap sd (of the log) of each in-turn median a stored runs.json holds (both jobs; layouts timed
    at least 6 steps in turn), 200 resamples of its steps each."""
    out = []
    for c in runs.get("confirmed", []) + runs.get("judged", []):
        xs = c["measured"].get("in_turn_s") or []
        if len(xs) >= 6:
            m = st.median(xs)
            out.append(st.pstdev([math.log(st.median(rng.choices(xs, k=len(xs))) / m) for _ in range(200)]))
    return out


def main(patterns):
    wls = sorted(w for a in patterns for w in glob.glob(a) if os.path.exists(w + "/runs.json"))
    truths, resid, boots = [], [], []
    rng = random.Random(0)
    for wl in wls:
        d, once, j1, j2 = load_runs(wl)
        pool = pooled(j1, j2)
        if len(pool) < 3:
            continue
        truths.append(sorted(pool.values()))
        pred = {key(r["layout"]): r["predicted"]["step_time_s"] for r in d.get("confirmed", [])}
        x = [math.log(pred[k] / pool[k]) for k in pool if k in pred]
        mu = st.mean(x)
        resid += [v - mu for v in x]
        boots += in_turn_median_sds(d, rng)
    s_judge = st.median(boots)
    s_model = st.pstdev(resid)
    print(f"{len(truths)} workloads; the judge's sd per layout (one 12-step in-turn median) {s_judge:.3f}; "
          f"the model's per-layout error sd against the pooled medians {s_model:.3f} "
          f"(the pooled medians' own noise, about {s_judge / math.sqrt(2):.3f}, included)")
    for s in (0.0, 0.01, 0.02, 0.03, s_model):
        for sj in (s_judge, s_judge / 2):
            ok = n = 0
            for _ in range(400):
                for T in truths:
                    meas = [t * math.exp(rng.gauss(0, sj)) for t in T]
                    pred = [t * math.exp(rng.gauss(0, s)) for t in T]
                    ch = min(range(len(T)), key=pred.__getitem__)
                    ok += meas[ch] <= 1.05 * min(meas)
                    n += 1
            p = ok / n
            print(f"  model sd {s:.3f}, judge sd {sj:.3f}: within 5% on {p:.1%} of workloads; "
                  f"6 of 6 on three seeds in a row {(p ** 6) ** 3:.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
