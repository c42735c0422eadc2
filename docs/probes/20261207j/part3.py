"""Probes 20261207j part 3 (PREREGISTRATION.md): run ``part3_worker.py`` in JOBS separate jobs on the 160x8 shape and
print rho_S per rank against rho_W.

    PYTHONPATH=. python docs/probes/20261207j/part3.py WORKDIR [JOBS] > docs/probes/20261207j/part3.out
    PYTHONPATH=. python docs/probes/20261207j/part3.py --same WORKDIR [JOBS [NPROC]] > docs/probes/20261207j/part3b.out
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    same = "--same" in sys.argv[1:]      # part 3b
    argv = [x for x in sys.argv[1:] if x != "--same"]
    wd, jobs = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 2
    nproc = int(argv[2]) if len(argv) > 2 else 4
    shape = json.load(open(wd / "shape.json"))
    chunks = "2,3,3,2" if shape.get("layers") == 8 else f"2,{shape['layers']}"    # only the first stage's output is used
    for j in range(1, jobs + 1):
        out = wd / f"part3{'b' if same else ''}_job{j}.json"
        t0 = time.time()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               os.path.join(HERE, "part3_worker.py"), "--spec", str(wd / "shape.json"), "--out", str(out),
               "--chunks", chunks] + (["--same"] if same else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if p.returncode != 0:
            print(f"job {j} failed: {(p.stderr or p.stdout)[-1500:]}")
            continue
        d = json.load(open(out))
        rho_w = max(d["W4"]) / max(d["W1"])
        if same:
            print(f"job {j} ({time.strftime('%H:%M:%S')}, {time.time() - t0:.0f} s): "
                  + "; ".join(f"{k} {max(v) * 1e3:.1f}" for k, v in d.items()) + " ms (slowest rank)")
            rho = {t: max(d[f"{t} 4"]) / max(d[f"{t} 1"]) for t in ("B3", "B1")}
            print(f"  rho_W {rho_w:.3f}; " + ", ".join(f"rho_{t} {v:.3f} ({v - rho_w:+.3f})" for t, v in rho.items()))
            continue
        rho_s = [s4 / s1 for s1, s4 in zip(d["S1"], d["S4"])]
        print(f"job {j} ({time.strftime('%H:%M:%S')}, {time.time() - t0:.0f} s): "
              + "; ".join(f"{k} " + "/".join(f"{x * 1e3:.1f}" for x in v) for k, v in d.items()) + " ms (per rank)")
        print(f"  rho_W {rho_w:.3f}; rho_S per rank " + ", ".join(f"{x:.3f}" for x in rho_s)
              + "; rho_S - rho_W " + ", ".join(f"{x - rho_w:+.3f}" for x in rho_s))


if __name__ == "__main__":
    main()
