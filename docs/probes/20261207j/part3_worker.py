"""Probes 20261207j part 3's worker (under torchrun, 4 processes; PREREGISTRATION.md): each rank's pipeline stage
forward and backward on its own (``S m``, 4/m micro-batches of size m) and the profile's whole-model case (``W m``),
every rank at once, in turn with the order rotated. Rank 0 writes {"S1": [per rank: median s], ...}.

    python -m torch.distributed.run --standalone --nproc-per-node 4 part3_worker.py --spec SHAPE --out OUT
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
from autoplan.execute.apply import token_cross_entropy
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.execute.pp import split_model
from autoplan.models.registry import sample_tokens

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import add_args, in_turn, rank_medians, whole_model_cases   # noqa: E402

PER_RANK = 4


def main() -> int:
    ap = argparse.ArgumentParser()
    add_args(ap)
    ap.add_argument("--chunks", default="2,3,3,2")
    ap.add_argument("--same", action="store_true", help="part 3b: blocks 1-3 and block 1 on every rank (B3, B1)")
    ap.add_argument("--mbs", default="1,4", help="micro-batch sizes (dividing 4)")
    a = ap.parse_args()
    sizes_mb = tuple(int(x) for x in a.mbs.split(","))

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        device = torch.device("cpu")
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=sizes_mb), device)
        rank, pp = dist.get_rank(), dist.get_world_size()
        sizes = tuple(int(x) for x in a.chunks.split(","))
        names = job.model.unit_names()
        bounds = [sum(sizes[:j]) for j in range(len(sizes) + 1)]
        stages = [names[x:y] for x, y in zip(bounds, bounds[1:])]
        stage = None if a.same else split_model(job.model, stages, [rank])[0].to(device).train()
        g = torch.Generator().manual_seed(rank)

        def stage_case(m: int):
            tokens = sample_tokens(job.vocab, m, job.seq_len, rank)
            labels = sample_tokens(job.vocab, m, job.seq_len, 1000 + rank)
            if rank == 0:
                x = tokens
            else:
                with torch.no_grad():
                    probe = split_model(job.model, stages, [0])[0](tokens)
                x = torch.randn(probe.shape, generator=g).requires_grad_(True)
            with torch.no_grad():
                out_shape = stage(x).shape
            up = None if rank == pp - 1 else torch.randn(out_shape, generator=g)

            def run(_=None) -> None:
                for _ in range(PER_RANK // m):
                    y = stage(x)
                    if rank == pp - 1:
                        token_cross_entropy(y, labels).backward()
                    else:
                        y.backward(up)
                for p in stage.parameters():
                    p.grad = None
            return run
        if a.same:      # part 3b: the same units on every rank, a random gradient from above
            conds = {}
            for units, tag in ((names[2:5], "B3"), (names[2:3], "B1")):
                mod = split_model(job.model, [units], [0])[0].to(device).train()
                for m in sizes_mb:
                    with torch.no_grad():
                        x0 = split_model(job.model, stages, [0])[0](sample_tokens(job.vocab, m, job.seq_len, rank))
                    x = torch.randn(x0.shape, generator=g).requires_grad_(True)
                    up = torch.randn(x0.shape, generator=g)

                    def run(_=None, mod=mod, x=x, up=up, n=PER_RANK // m) -> None:
                        for _ in range(n):
                            mod(x).backward(up)
                        for p in mod.parameters():
                            p.grad = None
                    conds[f"{tag} {m}"] = run
        else:
            conds = {"S1": stage_case(1), "S4": stage_case(4)}
        conds.update(whole_model_cases(job, sizes_mb, PER_RANK))
        medians = rank_medians(in_turn(conds, a.rounds, a.warmup, device))
        if rank == 0:
            with open(a.out, "w") as f:
                json.dump(medians, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
