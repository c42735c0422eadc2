import os, sys
import torch, torch.distributed as dist
from probe_setup import setup
from in_turn import time_in_turn
plan, cpu, prof, plain = setup(sys.argv[1], sys.argv[2])
def prof_ar():
    prof(); t = torch.zeros((), dtype=torch.float64); dist.all_reduce(t)
cases = {"profile run": prof, "profile run + allreduce": prof_ar, "executor no opt": lambda: plain(False),
         "executor AdamW": lambda: plain(True)}
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 10)), 26)
dist.destroy_process_group()
