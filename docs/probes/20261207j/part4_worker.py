"""Probes 20261207j part 4's worker (under torchrun on a stored workload's world size; PREREGISTRATION.md): the whole
model (``W m``) and a stack of ``--k0`` consecutive blocks from block 1 (``K m``), every rank at once, 4 samples per
sample (4/m micro-batches of size m; m must divide 4 or 4 divides m: then one micro-batch), in turn with the order
rotated. Rank 0 writes {condition: the slowest rank's median seconds}.
"""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.execute.pp import split_model
from autoplan.models.registry import sample_tokens

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_args, in_turn, rank_medians, whole_model_cases   # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    add_args(ap, rounds=8)
    ap.add_argument("--k0", type=int, required=True)
    ap.add_argument("--mbs", required=True)
    a = ap.parse_args()
    sizes = tuple(int(x) for x in a.mbs.split(","))

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        device = torch.device("cpu")
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=sizes), device)
        rank = dist.get_rank()
        names = job.model.unit_names()
        stack = split_model(job.model, [names[2:2 + a.k0]], [0])[0].to(device).train()
        embed = split_model(job.model, [names[:1]], [0])[0]
        g = torch.Generator().manual_seed(rank)
        conds = {}
        for m in sizes:
            n = max(1, 4 // m)
            with torch.no_grad():
                shape = embed(sample_tokens(job.vocab, m, job.seq_len, rank)).shape
            x = torch.randn(shape, generator=g).requires_grad_(True)
            up = torch.randn(shape, generator=g)

            def run(x=x, up=up, n=n) -> None:
                for _ in range(n):
                    stack(x).backward(up)
                for p in stack.parameters():
                    p.grad = None
            conds[f"K{m}"] = run
        whole = whole_model_cases(job, sizes)
        conds = {k: c for m in sizes for k, c in ((f"K{m}", conds[f"K{m}"]), (f"W{m}", whole[f"W{m}"]))}   # as run
        medians = rank_medians(in_turn(conds, a.rounds, a.warmup, device))
        if rank == 0:
            with open(a.out, "w") as f:
                json.dump({k: max(v) for k, v in medians.items()}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
