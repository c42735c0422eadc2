"""Summarise a demo_repeat.sh output folder: per run the exit line, the chosen layout, predicted and measured step,
the other layout trained, and whether the two trainings' losses agree.

    python docs/probes/20261206h/demo_summary.py /work/l3out
"""
import glob
import re
import sys

for path in sorted(glob.glob(f"{sys.argv[1]}/run*/out.txt"), key=lambda p: int(re.findall(r"run(\d+)", p)[-1])):
    text = open(path).read()
    rows = re.findall(r"^\s+(dp\d.*?)\s{2,}(\d+\.\d+)s\s+(\d+\.\d+)s\s+([\d. ]+?)\s+\((.*?)\)$", text, re.M)
    done = re.findall(r"done in (\d+) s", text)
    run = re.findall(r"run(\d+)", path)[-1]
    if not rows:
        print(f"run {run}: no training table; last lines: {text.strip().splitlines()[-3:]}")
        continue
    same = len({r[3].strip() for r in rows}) == 1
    print(f"run {run}: done in {done[0] if done else '?'} s; " + "; ".join(
        f"{r[4]}: {' '.join(r[0].split())} predicted {r[1]} s measured {r[2]} s" for r in rows)
        + f"; losses {'the same' if same else 'DIFFER'}")
