"""Between the two in-turn jobs of each stored workload: the job-wide factor and each layout's own move (sd),
against the bootstrap sd of one 12-step in-turn median (needed.py's).

    python docs/probes/20261206d/jobnoise.py '/work/exp/s2*/d*/w*'"""
import glob, math, os, random, statistics as st, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "20261205d"))
sys.path.insert(0, HERE)
from needed import in_turn_median_sds   # noqa: E402
from retro import load_runs   # noqa: E402


def main(patterns):
    sds, allx, boots = [], [], []
    rng = random.Random(0)
    for wl in sorted(w for a in patterns for w in glob.glob(a) if os.path.exists(w + "/runs.json")):
        d, _, j1, j2 = load_runs(wl)
        boots += in_turn_median_sds(d, rng)
        both = [k for k in j1 if k in j2]
        if len(both) < 3:
            continue
        x = [math.log(j2[k] / j1[k]) for k in both]
        mu = st.mean(x)
        r = [v - mu for v in x]
        sds.append(st.stdev(r))
        allx += r
        print(wl[-16:], len(both), "job factor %+.3f  case sd %.3f" % (mu, sds[-1]))
    print("median case sd between jobs: %.3f; pooled sd %.3f" % (st.median(sds), st.pstdev(allx)))
    print("bootstrap sd of one in-turn median (within job): median %.3f over %d" % (st.median(boots), len(boots)))
    print("=> between-job case sd expected from sampling alone: %.3f" % (math.sqrt(2) * st.median(boots)))


if __name__ == "__main__":
    main(sys.argv[1:])
