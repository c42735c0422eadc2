import os, sys, statistics
exec(open("gap.py").read().split("cases = {")[0])
from autoplan.execute.group_measure import _agree_max, _timed
def b2b(name, fn, n=12):
    ts = [_agree_max(_timed(fn, cpu)) for _ in range(n + 2)][2:]
    if dist.get_rank() == 0: print(f"{name:30s} back-to-back median {statistics.median(ts)*1e3:.1f} ms", flush=True)
order = os.environ.get("ORDER", "pm")
for c in order:
    if c == "p": b2b("profile run", prof)
    if c == "m": b2b("measure.py step", measure_step)
    if c == "n": b2b("executor no opt", lambda: plain(False))
dist.destroy_process_group()
