"""Probe: what one data-parallel step costs at two micro-batch sizes, timed four ways side by side.

    torchrun --nproc-per-node 2 benchmarks/microbatch_probe.py --shape SHAPE.json --global-batch 16 [--rounds 6]

A lead for issue 24's data-parallel misses (docs/fidelity.md, seed 20261213): the model prices
``dp W mbs (B/W/2) x 2`` and ``mbs (B/W) x 1`` within 1% of each other, and in 6 of 7 misses the
larger micro-batch measured faster. Every rank runs the same model (a fidelity shape file) on its
B/W samples, at micro-batch B/W/2 (two of them) and B/W (one), each of these in turn per round, the
slowest rank's time kept:

- ``profile``: the whole model's forward+backward back to back, gradients accumulating onto the last
  sample's (how ``profile model --nproc`` times the whole model, ``group_measure._whole_model_case``),
- ``fresh``: the same with gradients set to None before each micro-batch,
- ``plain``: a training step without DDP (``zero_grad(set_to_none=True)``, the micro-batches, loss / m),
- ``ddp``: the executor's step under DDP (gradient sync on the last micro-batch only), no optimizer,
- ``ddp+opt``: the same with AdamW's step.

Prints each case's median and minimum over the rounds (two more rounds first, untimed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    from autoplan.execute.dp import set_gradient_sync
    from autoplan.models.registry import build_model_from_spec, sample_tokens

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", required=True, help="a model shape file (benchmarks/fidelity.py writes one per workload)")
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    per = args.global_batch // world
    if per < 2 or per % 2 or args.global_batch % world:
        raise SystemExit(f"error: --global-batch {args.global_batch} must give each of {world} ranks an even count >= 2")
    shape = json.loads(Path(args.shape).read_text())
    model = build_model_from_spec(args.shape, seed=0)
    tokens = sample_tokens(shape["vocab"], per, shape["seq_len"], rank)
    targets = sample_tokens(shape["vocab"], per, shape["seq_len"], 100 + rank)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss_of(module, t, y):
        return F.cross_entropy(module(t).flatten(0, 1).float(), y.flatten())

    def profile(mbs, m, fresh=False):
        for _ in range(m):
            if fresh:
                model.zero_grad(set_to_none=True)
            loss_of(model, tokens[:mbs], targets[:mbs]).backward()

    def plain(mbs, m):
        opt.zero_grad(set_to_none=True)
        for t, y in zip(tokens.chunk(m), targets.chunk(m)):
            (loss_of(model, t, y) / m).backward()

    def ddp_step(mbs, m, step=False):
        opt.zero_grad(set_to_none=True)
        for i, (t, y) in enumerate(zip(tokens.chunk(m), targets.chunk(m))):
            set_gradient_sync(ddp, i == m - 1)
            (loss_of(ddp, t, y) / m).backward()
        if step:
            opt.step()

    ways = {"profile": profile, "fresh": lambda b, m: profile(b, m, fresh=True), "plain": plain,
            "ddp": ddp_step, "ddp+opt": lambda b, m: ddp_step(b, m, step=True)}
    cases = [(name, mbs) for name in ways for mbs in (per // 2, per)]
    times: dict[tuple[str, int], list[float]] = {c: [] for c in cases}
    for r in range(args.rounds + 2):
        for name, mbs in cases:
            dist.barrier()
            t0 = time.perf_counter()
            ways[name](mbs, per // mbs)
            took = torch.tensor([time.perf_counter() - t0])
            dist.all_reduce(took, op=dist.ReduceOp.MAX)
            if r >= 2:
                times[(name, mbs)].append(float(took))
    if rank == 0:
        print(f"{shape.get('name', args.shape)}: {per} samples per rank on {world} ranks, {args.rounds} rounds")
        for name, mbs in cases:
            v = times[(name, mbs)]
            print(f"  {name:8s} mbs{mbs}x{per // mbs}: median {statistics.median(v) * 1e3:8.1f} ms, "
                  f"min {min(v) * 1e3:8.1f} ms")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
