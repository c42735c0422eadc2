"""Probes 20261207j part 4 (PREREGISTRATION.md): measure each stored workload's whole model and stage-sized block
stack in one job (``part4_worker.py``), writing OUTDIR/<seed dir>_<workload>.json.

    PYTHONPATH=. python docs/probes/20261207j/part4.py OUTDIR > docs/probes/20261207j/part4.out
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import stored_workloads   # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PATTERNS = ("/work/exp/s2*/d*/w*", "/work/exp/s23/shape*/w*")


def key(wl: str) -> str:
    return "_".join(wl.rstrip("/").split("/")[-2:])


def k0_of(layers: int, world: int) -> int:
    return max(1, round(layers / world))


def main() -> None:
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for wl in sorted(w for p in PATTERNS for w in stored_workloads(p)):
        out = os.path.join(outdir, key(wl) + ".json")
        if os.path.exists(out):
            continue
        d = json.load(open(os.path.join(wl, "runs.json")))["workload"]
        model = json.load(open(os.path.join(wl, "model.json")))
        sizes = sorted({g["mbs"] for g in model["whole_model_timings"]})
        k0 = k0_of(d["shape"]["layers"], d["world"])
        t0 = time.time()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={d['world']}",
               os.path.join(HERE, "part4_worker.py"), "--spec", os.path.join(wl, "shape.json"), "--k0", str(k0),
               "--mbs", ",".join(map(str, sizes)), "--out", out]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if p.returncode != 0:
            print(f"{key(wl)}: failed: {(p.stderr or p.stdout)[-600:]}", flush=True)
            continue
        got = json.load(open(out))
        got.update(k0=k0, world=d["world"], sizes=sizes)
        json.dump(got, open(out, "w"))
        m0 = sizes[0]
        kap = {m: (got[f"K{m}"] / got[f"K{m0}"]) / (got[f"W{m}"] / got[f"W{m0}"]) for m in sizes}
        print(f"{time.strftime('%H:%M:%S')} {key(wl)} world {d['world']} k0 {k0} ({time.time() - t0:.0f} s): kappa "
              + ", ".join(f"{m}: {v:.3f}" for m, v in kap.items()), flush=True)


if __name__ == "__main__":
    main()
