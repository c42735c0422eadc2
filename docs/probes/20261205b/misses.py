"""Every miss of the model's choice by more than 5% in the stored fidelity seed logs (judged, as fidelity.py does,
on the first in-turn job), with how far apart the model predicted the chosen layout and the fastest one.

    python docs/probes/20261205b/misses.py docs/probes/*/seed*.log
"""
import re
import sys

for path in sys.argv[1:]:
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"== (random-\S+), the chosen layout and those", lines[i])
        if not m:
            i += 1
            continue
        rows, j = [], i + 2
        while j < len(lines) and lines[j].strip():
            tokens = lines[j][1:].split()
            numbers = [k for k, t in enumerate(tokens) if re.match(r"^-?\d+\.\d+$", t)]
            if len(numbers) >= 2 and "in turn" in lines[j]:
                rows.append((lines[j].startswith("*"), float(tokens[numbers[0]]), float(tokens[numbers[0] + 1])))
            j += 1
        chosen = [r for r in rows if r[0]]
        if chosen:
            fastest = min(rows, key=lambda r: r[2])
            miss = chosen[0][2] / fastest[2] - 1
            if miss > 0.05:
                print(f"{path.split('/')[-1]} {m.group(1)}: chosen +{100 * miss:.1f}% from the fastest, "
                      f"which was predicted {100 * (fastest[1] / chosen[0][1] - 1):+.1f}% from it")
        i = j
