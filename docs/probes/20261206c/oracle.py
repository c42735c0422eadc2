"""The judge's noise floor against the model's choice, from every stored fidelity log in docs/probes.

    python docs/probes/20261206c/oracle.py

Every `--random` workload since 7cf2ef2 is timed in turn in two jobs. `validate --out`'s pick is the
fastest of the first job; judged on the second it is what a choice that measured every candidate would
score on this machine (its misses are the measurement's noise, not a model's). The model's choice is
judged on the same second job. Each (log directory, seed, workload) counted once (a log reprinted in a
later directory counts under both)."""
import collections, glob, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(os.path.join(HERE, "..", "*", "*.log"))):
    src = os.path.basename(os.path.dirname(f)) + "/" + os.path.basename(f)[:24]
    for line in open(f):
        m = re.search(r"^\s+(random-\d+-\d+):.*validate --out writes (.*?): ([+-]\d+\.\d+)% from the fastest of a "
                      r"second job \(the model's choice ([+-]\d+\.\d+)%\)", line)
        if m:
            rows[(src, m.group(1))] = (float(m.group(3)), float(m.group(4)))
        m = re.search(r"^\s+(random-\d+-\d+):.*validate --out writes the model's choice: ([+-]\d+\.\d+)% from the "
                      r"fastest of a second job", line)
        if m:
            rows[(src, m.group(1))] = (float(m.group(2)), float(m.group(2)))
by = collections.defaultdict(list)
for (src, _), r in rows.items():
    by[src].append(r)
for src, v in by.items():
    print(f"{src:40s} workloads {len(v)}  validate --out's pick within 5%: {sum(o <= 5 for o, _ in v)}  "
          f"the model's choice: {sum(c <= 5 for _, c in v)}")
n = len(rows)
o = sum(a <= 5 for a, _ in rows.values())
c = sum(b <= 5 for _, b in rows.values())
seeds = len(by)
print(f"{n} workloads of {seeds} seed runs, judged on the second in-turn job: validate --out's pick within 5% on {o} "
      f"({o / n:.1%}), the model's choice on {c} ({c / n:.1%}); seed runs with every workload within 5%: "
      f"{sum(all(a <= 5 for a, _ in v) for v in by.values())} and {sum(all(b <= 5 for _, b in v) for v in by.values())}")
