"""The profile's pipeline run against the executor's step of the same plan, in turn, in one job."""
import os, sys
import torch.distributed as dist
from probe_setup import measured_steps, setup
from in_turn import time_in_turn
plan, cpu, prof, plain = setup(sys.argv[1], sys.argv[2])
measure_step, train_step = measured_steps(plan)
cases = {"profile run": prof, "executor no opt": lambda: plain(False), "executor AdamW": lambda: plain(True),
         "measure.py step": measure_step, "train_step (async loss)": train_step}
time_in_turn(cases, cpu, int(os.environ.get("ROUNDS", 10)), 26)
dist.destroy_process_group()
