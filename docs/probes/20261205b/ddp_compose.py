"""Does a DDP step cost the sum of its phases timed apart (as the profile composes it)?

In one torchrun job, on one DDP-wrapped model with AdamW, in turn every round:
  whole: barrier, forward + backward + optimizer step + zero_grad, one timer (as the executor's measure times it);
  split: barrier, forward; barrier, backward; barrier, optimizer step, each timed apart;
  plain: the same model's module without DDP, barrier, forward; barrier, backward (no all-reduce).
Each timer's value is the slowest rank's (all-reduce MAX). Prints medians.
"""
import json, statistics, sys, time
import torch, torch.distributed as dist, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from autoplan.models.registry import build_model_from_spec, sample_tokens

shape_file, mbs, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
rank = dist.get_rank()
shape = json.load(open(shape_file))
model = build_model_from_spec(shape_file, shape, seed=0)
plain = build_model_from_spec(shape_file, shape, seed=0)
ddp = DDP(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
tokens = sample_tokens(shape["vocab"], mbs, shape["seq_len"], 1 + rank)
targets = sample_tokens(shape["vocab"], mbs, shape["seq_len"], 1001 + rank)

def loss_of(m):
    return F.cross_entropy(m(tokens).flatten(0, 1).float(), targets.flatten())

def slowest(dt):
    t = torch.tensor([dt], dtype=torch.float64); dist.all_reduce(t, op=dist.ReduceOp.MAX); return float(t)

def timed(fn):
    dist.barrier(); t0 = time.perf_counter(); out = fn(); return out, slowest(time.perf_counter() - t0)

def whole():
    loss = loss_of(ddp); loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)

res = {k: [] for k in ("whole", "fwd", "bwd", "opt", "split_sum", "plain_fwd", "plain_bwd")}
for r in range(rounds + 2):
    _, w = timed(whole)
    loss, f = timed(lambda: loss_of(ddp))
    _, b = timed(lambda: loss.backward())
    _, o = timed(lambda: (opt.step(), opt.zero_grad(set_to_none=True)))
    pl, pf = timed(lambda: loss_of(plain))
    _, pb = timed(lambda: pl.backward())
    plain.zero_grad(set_to_none=True)
    if r >= 2:
        for k, v in zip(res, (w, f, b, o, f + b + o, pf, pb)):
            res[k].append(v)
if rank == 0:
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"mbs {mbs}: " + ", ".join(f"{k} {1000*v:.1f} ms" for k, v in med.items()))
    print(f"  split_sum / whole = {med['split_sum']/med['whole']:.3f};  "
          f"sum of phase medians / whole = {(med['fwd']+med['bwd']+med['opt'])/med['whole']:.3f}; "
          f"DDP added (bwd - plain_bwd + fwd - plain_fwd) {1000*(med['bwd']-med['plain_bwd']+med['fwd']-med['plain_fwd']):.1f} ms")
dist.destroy_process_group()
