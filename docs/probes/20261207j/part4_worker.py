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
import statistics as st

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.execute.measure import turn_order
from autoplan.execute.pp import split_model
from autoplan.models.registry import sample_tokens


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--k0", type=int, required=True)
    ap.add_argument("--mbs", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
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
        first = None
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
            case = gm._whole_model_case(job, m, first.module if first is not None else None)
            first = first or case

            def whole(c=case, n=n) -> None:
                for _ in range(n):
                    c.backward(c.forward())
                c.module.zero_grad(set_to_none=True)
            conds[f"W{m}"] = whole
        keys = list(conds)
        got = {k: [] for k in keys}
        for r in range(a.warmup + a.rounds):
            for k in turn_order(len(keys), r):
                t = gm._timed(conds[keys[k]], device)
                if r >= a.warmup:
                    got[keys[k]].append(t)
        mine = {k: st.median(v) for k, v in got.items()}
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        if rank == 0:
            with open(a.out, "w") as f:
                json.dump({k: max(e[k] for e in every) for k in mine}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
