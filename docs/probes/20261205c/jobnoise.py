"""How much a layout's in-turn median moves between the two in-turn jobs of a fidelity workload, by family.

For every workload with both in-turn tables (the confirm job and the second, judging job), each layout's
second / first median is divided by the workload's median of that ratio (taking out the machine running
faster or slower between the jobs); the rest is grouped by family (pure data parallel, pipelines by depth and
by interleaving, world size) and its spread printed: what the same layout does from one job to the next.

    python docs/probes/20261205c/jobnoise.py docs/probes/*/seed*.log
"""
import collections
import re
import statistics
import sys


def table(lines, i):
    rows, j = {}, i + 2
    while j < len(lines) and lines[j].strip():
        m = re.search(r"\(in turn: median of \d+ steps", lines[j])
        if m:
            tokens = lines[j][1:].split()
            numbers = [k for k, t in enumerate(tokens) if re.match(r"^-?\d+\.\d+$", t)]
            rows[" ".join(tokens[: numbers[0]])] = float(tokens[numbers[0] + 1])
        j += 1
    return rows


groups = collections.defaultdict(list)
for path in sys.argv[1:]:
    lines = open(path).read().split("\n")
    world = {}
    first = {}
    for i, line in enumerate(lines):
        m = re.match(r"\[\d+/\d+\] (random-\S+): .* on (\d) processes", line)
        if m:
            world[m.group(1)] = int(m.group(2))
        m = re.match(r"== (random-\S+), the chosen layout and those measured faster", line)
        if m:
            first[m.group(1)] = table(lines, i)
        m = re.match(r"== (random-\S+), the same layouts timed in turn again in a second job", line)
        if m and m.group(1) in first:
            second = table(lines, i)
            both = [k for k in second if k in first[m.group(1)]]
            if len(both) < 3:
                continue
            ratios = {k: second[k] / first[m.group(1)][k] for k in both}
            med = statistics.median(ratios.values())
            for k, r in ratios.items():
                pp = int(re.search(r"pp(\d+)", k).group(1))
                fam = "data parallel" if pp == 1 else ("interleaved" if "interleaved" in k else "1f1b/gpipe") + f" pp{pp}"
                groups[(world[m.group(1)], fam)].append(r / med - 1)
for (w, fam), v in sorted(groups.items()):
    print(f"{w} processes, {fam:20s} n={len(v):3d}  job-to-job spread: median |dev| {statistics.median(abs(x) for x in v):.1%}, "
          f"90th pct {sorted(abs(x) for x in v)[int(0.9 * (len(v) - 1))]:.1%}, max {max(abs(x) for x in v):.1%}")
