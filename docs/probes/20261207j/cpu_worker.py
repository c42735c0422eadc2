"""Probes 20261207j, exploratory: where a pipeline step's CPU goes. The profile's ``pipeline_step`` of a pp4 plan (as
part 5's A), and the whole model's case on every rank, each timed in rounds; per rank the process's CPU seconds
(every thread: gloo's too) and its own compute thread's, against the step's wall seconds. Rank 0 writes
{name: {"wall": [...], "cpu": [[per rank]...], "thread": [[per rank]...]}}.
"""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.plan.plan import Plan

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_args, plan_pipeline_step   # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    add_args(ap, rounds=8)
    ap.add_argument("--plan", required=True)
    a = ap.parse_args()

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        device = torch.device("cpu")
        lay = Plan.load(a.plan).layout
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=(lay.mbs,)), device)
        step = plan_pipeline_step(job, lay, device)
        whole = gm._whole_model_case(job, lay.mbs)

        def w():
            for _ in range(lay.num_microbatches // lay.pp):      # this rank's share of the batch
                whole.backward(whole.forward())
        out = {}
        for name, fn in (("pipeline", step), ("whole model", w)):
            rec = {"wall": [], "cpu": [], "thread": []}
            for r in range(a.rounds + a.warmup):
                dist.barrier()
                c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
                fn()
                dist.barrier()
                got = torch.tensor([time.process_time() - c0, time.thread_time() - t0, time.perf_counter() - w0])
                every = [torch.zeros(3) for _ in range(dist.get_world_size())]
                dist.all_gather(every, got)
                if r >= a.warmup:
                    rec["wall"].append(max(float(e[2]) for e in every))
                    rec["cpu"].append([float(e[0]) for e in every])
                    rec["thread"].append([float(e[1]) for e in every])
            out[name] = rec
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump(out, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
