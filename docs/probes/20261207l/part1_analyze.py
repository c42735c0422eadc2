"""Part 1's H1: does the machine's speed, read in CPU time beside the runs, account for the level?

For each once-measured launch: x = log(monitor's median CPU s per block during the launch / its median over the
workload's profile), y = log(measured / predicted). Launch spans run from its `[i/10]` line to the next stamped
line; the profile's span from the workload's `[1/1]` line to its cluster.json's write."""
import json
import math
import os
import re
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

P = Path(__file__).parent
E = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/exp/s28")
mon = [json.loads(line) for line in open(E / "monitor.jsonl")]
day = datetime.fromtimestamp(mon[0]["t"], timezone.utc).date()


def ts(hms: str) -> float:
    h, m, s = hms.split(":")
    base = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
    return base + int(h) * 3600 + int(m) * 60 + float(s)


def med(t0: float, t1: float) -> tuple[float | None, int]:
    v = [r["cpu_s"] for r in mon if t0 <= r["t"] < t1]
    return (statistics.median(v) if v else None), len(v)


def pearson(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys))
    sxx = sum((a - mx) ** 2 for a in xs)
    syy = sum((b - my) ** 2 for b in ys)
    return sxy / math.sqrt(sxx * syy)


X, Y = [], []
for run in ("r1", "r2"):
    for shape in ("192x6", "160x8"):
        log = P / f"part1_{run}_{shape}.log"
        wd = E / run / shape / "w0"
        if not log.exists() or not (wd / "runs.json").exists():
            continue
        lines = [(ts(line[:10]), line[11:].rstrip("\n")) for line in open(log) if re.match(r"\d\d:\d\d:\d\d\.\d ", line)]
        start = next(t for t, s in lines if re.match(r"\[1/1\]", s))
        prof_end = os.path.getmtime(wd / "cluster.json")
        ref, n_ref = med(start, prof_end)
        data = json.load(open(wd / "runs.json"))
        launches = [(i, t) for i, (t, s) in enumerate(lines) if re.match(r"\s+\[\d+/\d+\] ", s)]
        xs, ys = [], []
        print(f"{run} {shape}: profile {(prof_end - start):.0f} s, reference "
              f"{ref * 1e3:.2f} ms per block (n={n_ref})")
        for k, (i, t0) in enumerate(launches):
            t1 = lines[i + 1][0] if i + 1 < len(lines) else t0 + 60
            m, n = med(t0, t1)
            r = data["runs"][k]
            if r["measured"] is None or m is None:
                continue
            x = math.log(m / ref)
            y = math.log(r["measured"]["step_time_s"] / r["predicted"]["step_time_s"])
            xs.append(x); ys.append(y)
            print(f"  launch {k + 1:2d}: speed {m * 1e3:6.2f} ms (n={n:2d}) x {x:+.3f}  y {y:+.3f}")
        for name, key in (("in-turn job 1", "confirmed"), ("in-turn job 2", "judged")):
            spans = [t for t, s in lines if "measured again in turn in one job" in s]
            if key not in data or len(spans) < (1 if key == "confirmed" else 2):
                continue
            j0 = spans[0 if key == "confirmed" else 1]
            after = [t for t, s in lines if t > j0 and "confirm: " in s and "median of" in s]
            j1 = after[0] if after else j0
            m, n = med(j0, j1)
            yj = [math.log(r["measured"]["step_time_s"] / r["predicted"]["step_time_s"])
                  for r in data[key] if r["measured"] and r["measured"].get("in_turn_s")]
            if m:
                print(f"  {name}: speed {m * 1e3:.2f} ms (n={n}), x {math.log(m / ref):+.3f}, mean y {statistics.fmean(yj):+.3f}")
        if xs:
            print(f"  run mean x {statistics.fmean(xs):+.3f}, mean y {statistics.fmean(ys):+.3f}")
        X += xs; Y += ys
if len(X) > 2:
    print(f"\nH1: Pearson r(x, y) over {len(X)} launches = {pearson(X, Y):+.2f} (holds if >= 0.5)")
