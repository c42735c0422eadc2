"""Does the order of the profile's whole-model cases bias the micro-batch sizes' ratios?

    torchrun --nproc-per-node W docs/probes/20261206c/order.py --shape SHAPE.json [--mbs 1 2 4 8] [--blocks 5]

The profile (``group_measure._measure_whole_model``) times the whole model at every size, plain then
under DDP, one sample of each per round in a fixed order (1, 2, 4, 8, ddp 1, 2, 4, 8): each size always
follows the same other. Here the same cases (the profile's own ``_whole_model_case`` and ``_pairs``)
are timed in one job, in blocks, each block ``repeats`` rounds in one of three orders: ascending (the
profile's), descending, rotated each round (as ``validate`` times layouts); and "blocked" (added after the
first run): each size's ``repeats`` samples one after another, as a training run repeats one size. Printed per order: each
size's per-sample forward+backward (median over rounds, slowest rank) and its ratio to the largest.
"""
import argparse, statistics
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _whole_model_case, _pairs, _agree_max
from autoplan.execute.measure import turn_order

ap = argparse.ArgumentParser()
ap.add_argument("--shape", required=True)
ap.add_argument("--mbs", type=int, nargs="+", default=[1, 2, 4, 8])
ap.add_argument("--repeats", type=int, default=7)
ap.add_argument("--blocks", type=int, default=4)
a = ap.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
cfg = GroupProfileConfig(spec=a.shape, mbs_list=tuple(a.mbs))
dev = torch.device("cpu")
job = _Job(cfg, dev)
first = _whole_model_case(job, a.mbs[0])
cases = [first] + [_whole_model_case(job, m, first.module) for m in a.mbs[1:]]
n = len(cases)
inner = []
for c in cases:
    w = min(sum(_pairs(c, dev, 1)) for _ in range(2))
    inner.append(int(_agree_max(max(1, min(cfg.max_inner, -(-cfg.min_sample_s // max(w, 1e-9)))))))
orders = {"ascending": lambda r: list(range(n)), "descending": lambda r: list(range(n))[::-1],
          "rotated": lambda r: turn_order(n, r), "blocked": None}
got = {o: [[] for _ in range(n)] for o in orders}
for b in range(a.blocks):
    for o, order in orders.items():
        # blocked: each size's samples one after another (a training run repeats one size), sizes in turn per block
        seq = [k for k in range(n) for _ in range(a.repeats)] if order is None else \
            [k for r in range(a.repeats) for k in order(r)]
        for k in seq:
            dist.barrier()
            got[o][k].append(_agree_max(sum(_pairs(cases[k], dev, inner[k]))))
if rank == 0:
    print(f"{a.shape}: world {dist.get_world_size()}, sizes {a.mbs}, {a.blocks} blocks x {a.repeats} rounds per order")
    for o in orders:
        per = [statistics.median(got[o][k]) / a.mbs[k] for k in range(n)]
        print(f"  {o:10s} per sample ms " + "  ".join(f"mbs{m}: {p*1e3:7.2f}" for m, p in zip(a.mbs, per))
              + "   ratio to largest " + " ".join(f"{p / per[-1]:.3f}" for p in per))
dist.destroy_process_group()
