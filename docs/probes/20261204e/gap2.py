"""gap.py's closures back to back (12 steps each after 2), in the order ORDER says (p: profile run, m: as
execute.measure times it, n: executor without optimizer), to see the machine drift within one job."""
import os, sys, statistics
import torch.distributed as dist
from probe_setup import measured_steps, setup
from autoplan.execute.group_measure import _agree_max, _timed
plan, cpu, prof, plain = setup(sys.argv[1], sys.argv[2])
measure_step, _ = measured_steps(plan)
def b2b(name, fn, n=12):
    ts = [_agree_max(_timed(fn, cpu)) for _ in range(n + 2)][2:]
    if dist.get_rank() == 0: print(f"{name:30s} back-to-back median {statistics.median(ts)*1e3:.1f} ms", flush=True)
for c in os.environ.get("ORDER", "pm"):
    if c == "p": b2b("profile run", prof)
    if c == "m": b2b("measure.py step", measure_step)
    if c == "n": b2b("executor no opt", lambda: plain(False))
dist.destroy_process_group()
