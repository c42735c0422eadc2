"""Probes 20261207j part 2 (PREREGISTRATION.md): run ``part2_worker.py`` in JOBS separate jobs on the 160x8 shape,
print each job's medians and the ratios H2 names.

    PYTHONPATH=. python docs/probes/20261207j/part2.py WORKDIR [JOBS] > docs/probes/20261207j/part2.out
"""
import json
import os
import statistics as st
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    wd, jobs = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2
    for j in range(1, jobs + 1):
        out = wd / f"part2_job{j}.json"
        t0 = time.time()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
               os.path.join(HERE, "part2_worker.py"), "--spec", str(wd / "shape.json"), "--out", str(out)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
        if p.returncode != 0:
            print(f"job {j} failed: {(p.stderr or p.stdout)[-1500:]}")
            continue
        d = json.load(open(out))
        med = {k: st.median(v) for k, v in d["steps_s"].items()}
        print(f"job {j} ({time.strftime('%H:%M:%S')}, {time.time() - t0:.0f} s, cases {d['cases_s']:.0f} s): "
              + ", ".join(f"{k} {v * 1e3:.0f}" for k, v in med.items()) + " ms")
        r = {when: med[f"{when} mbs4"] / med[f"{when} mbs1"]
             for when in ("before: early", "after: early", "after: late")}
        print("  R = mbs4 x4 / mbs1 x16: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items())
              + f"; after - before (early) {r['after: early'] - r['before: early']:+.3f}, "
              f"late - early (after) {r['after: late'] - r['after: early']:+.3f}")


if __name__ == "__main__":
    main()
