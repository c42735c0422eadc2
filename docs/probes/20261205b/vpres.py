"""Residuals of the fidelity logs' first tables, by pipeline family.

For each workload, every layout's predicted / measured step time is divided by the workload's median of that
ratio (taking out the workload's own scale, e.g. a machine running slow that hour), and the rest is grouped by
(pp, vp) and by whether the blocks split evenly over pp x vp chunks. Rows that failed to run are skipped.

    python docs/probes/20261205b/vpres.py docs/probes/*/seed*.log
"""
import collections
import re
import statistics
import sys

by_pp_vp = collections.defaultdict(list)
by_evenness = collections.defaultdict(list)
for path in sys.argv[1:]:
    lines = open(path).read().split("\n")
    blocks = {}
    for line in lines:
        m = re.match(r"\[\d+/\d+\] (random-\S+): (\d+) blocks", line)
        if m:
            blocks[m.group(1)] = int(m.group(2))
    i = 0
    while i < len(lines):
        m = re.match(r"== (random-\S+) \(chosen first\)", lines[i])
        if not m:
            i += 1
            continue
        n_blocks = blocks.get(m.group(1))
        rows, j = [], i + 2
        while j < len(lines) and lines[j].strip():
            tokens = lines[j][1:].split()
            numbers = [k for k, t in enumerate(tokens) if re.match(r"^-?\d+\.\d+$", t)]
            if len(numbers) >= 2 and numbers[1] == numbers[0] + 1:
                rows.append((" ".join(tokens[: numbers[0]]), float(tokens[numbers[0]]), float(tokens[numbers[0] + 1])))
            j += 1
        median = statistics.median(p / s for _, p, s in rows)
        for layout, pred_s, meas_s in rows:
            pp = int(re.search(r"pp(\d+)", layout).group(1))
            vp_match = re.search(r"vp(\d+)", layout)
            vp = int(vp_match.group(1)) if vp_match else 1
            residual = pred_s / meas_s / median - 1
            by_pp_vp[(pp, vp)].append(residual)
            if pp > 1 and n_blocks:
                by_evenness[("interleaved" if vp > 1 else "1f1b/gpipe", "even" if n_blocks % (pp * vp) == 0 else "uneven")].append(residual)
        i = j


def show(name, values):
    print(f"{name:28s} n={len(values):3d}  median {100 * statistics.median(values):+5.1f}%  "
          f"mean {100 * statistics.mean(values):+5.1f}%  share under by more than 5%: {sum(v < -0.05 for v in values) / len(values):.2f}")


for (pp, vp), values in sorted(by_pp_vp.items()):
    show(f"pp{pp} vp{vp}", values)
for key, values in sorted(by_evenness.items()):
    show(" ".join(key), values)
