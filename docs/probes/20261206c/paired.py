"""Each pre-registered arm against head on the workloads drawn after the arm was written down (their
variants.py outputs in ../20261206b and here), paired per workload: where one is within 5% and the other
not. Judge: the two in-turn jobs pooled, and job 1 alone.

    python docs/probes/20261206c/paired.py"""
import collections, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = [os.path.join(HERE, "..", "20261206b", f"variants_s{s}.out") for s in (47, 48, 49)] + \
        [os.path.join(HERE, f) for f in ("variants_s50_s51.out", "variants_s52.out")]
FRESH_FROM = {"head": 20261247, "fc_pooled": 20261247, "s_at_mbs": 20261247, "big_mbs2": 20261247,
              "fc_s": 20261250, "fc_runs": 20261252}     # the first seed drawn after each arm's commit
LINE = re.compile(r"^(\w+)\s+\S*?d(\d{8})/(w\d) err\s+\S+ pick pooled\s+([+-]\S+)% job1\s+([+-]\S+)%")


def main(files):
    """Print each arm against head on its fresh workloads in the variants.py outputs ``files``."""
    got = collections.defaultdict(dict)
    for f in files:
        for line in open(f):
            m = LINE.match(line)
            if m:
                arm, seed, w, pooled, job1 = m.groups()
                got[arm][(int(seed), w)] = (float(pooled) <= 5, float(job1) <= 5)
    for arm, first in FRESH_FROM.items():
        keys = [k for k in got[arm] if k[0] >= first and k in got["head"]]
        for j, judge in enumerate(("pooled", "job 1")):
            a = sum(got[arm][k][j] for k in keys)
            h = sum(got["head"][k][j] for k in keys)
            only_arm = sum(got[arm][k][j] and not got["head"][k][j] for k in keys)
            only_head = sum(got["head"][k][j] and not got[arm][k][j] for k in keys)
            print(f"{arm:9s} {len(keys):2d} fresh workloads (seeds {first}-), {judge:6s}: arm {a:2d}, head {h:2d}; "
                  f"only the arm {only_arm}, only head {only_head}")


if __name__ == "__main__":
    main(FILES)
