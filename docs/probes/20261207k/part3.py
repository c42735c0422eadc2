"""Part 3 (PREREGISTRATION.md): the machine's rate during each once-measured launch against its error.

    python docs/probes/20261207k/part3.py /work/exp/s27/shapes3/192x6/w0 /work/exp/s27/shapes3/160x8/w0
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path


def main() -> None:
    xs, ys = [], []
    for d in map(Path, sys.argv[1:]):
        ref = json.loads((d / "cluster.json").read_text())["device"]["concurrent_compute_flops_per_s"]
        runs = json.loads((d / "runs.json").read_text())["runs"]
        print(f"{d}: profiled rate {ref / 1e9:.1f} GFLOP/s")
        for r in runs:
            m = r.get("measured")
            if not m or not m.get("machine_flops_per_s"):
                continue
            rate = statistics.fmean(m["machine_flops_per_s"])
            x, y = math.log(rate / ref), math.log(m["step_time_s"] / r["predicted"]["step_time_s"])
            xs.append(x), ys.append(y)
            print(f"  rate {rate / ref:.3f}x ({', '.join(f'{v / 1e9:.1f}' for v in m['machine_flops_per_s'])})  "
                  f"measured / predicted {m['step_time_s'] / r['predicted']['step_time_s']:.3f}")
        conf = json.loads((d / "runs.json").read_text())["confirmed"]
        jobs = {tuple(r["measured"].get("in_turn_machine_flops_per_s", [])) for r in conf if r.get("measured")}
        for j in sorted(jobs - {()}):
            print(f"  in-turn job: {', '.join(f'{v / 1e9:.1f}' for v in j)} GFLOP/s ({statistics.fmean(j) / ref:.3f}x)")
    r = statistics.correlation(xs, ys)
    print(f"H3: Pearson r(log rate ratio, log measured/predicted) = {r:+.2f} over {len(xs)} launches: "
          f"{'holds' if r <= -0.5 else 'fails'} (r <= -0.5)")


if __name__ == "__main__":
    main()
