"""Probes 20261207j part 5 (PREREGISTRATION.md): three pairs of jobs A (group set-up) and B (launch set-up), alternating.

    PYTHONPATH=. python docs/probes/20261207j/part5.py PLAN SHAPE OUTDIR > docs/probes/20261207j/part5.out
"""
import json
import os
import statistics as st
import subprocess
import sys
import time

from autoplan.execute.launch import torchrun_command

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    plan, shape, outdir = sys.argv[1:4]
    os.makedirs(outdir, exist_ok=True)
    got = {}
    for pair in range(1, 4):
        for mode in ("A", "B"):
            out = os.path.join(outdir, f"part5_{mode}{pair}.json")
            args = ["--spec", shape, "--out", out] + (["--launch"] if mode == "B" else [])
            p = subprocess.run(torchrun_command(plan, os.path.join(HERE, "part5_worker.py"), args),
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"{mode}{pair} failed: {(p.stderr or p.stdout)[-800:]}", flush=True)
                continue
            d = json.load(open(out))
            got[(mode, pair)] = st.median(d["P"])
            print(f"{time.strftime('%H:%M:%S')} {mode}{pair}: {got[(mode, pair)] * 1e3:.1f} ms (threads {d['threads']})",
                  flush=True)
        if ("A", pair) in got and ("B", pair) in got:
            print(f"  pair {pair}: B / A - 1 = {got[('B', pair)] / got[('A', pair)] - 1:+.1%}", flush=True)


if __name__ == "__main__":
    main()
