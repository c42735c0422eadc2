"""The profile's whole-model cases as group_measure times them (barrier, then a forward / backward pair timed
apart), plain and DDP, with the gradients left to accumulate (as the profile does) and set to None after each
backward (as the executor's step does), all in turn in one job. Prints, per size, what DDP adds as the profile
composes it (max over ranks of each phase's median) and from max over ranks of the median of fwd+bwd."""
import json, statistics, sys, time
import torch, torch.distributed as dist, torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from autoplan.models.registry import build_model_from_spec, sample_tokens

shape_file, repeats = sys.argv[1], int(sys.argv[2])
sizes = [int(x) for x in sys.argv[3].split(",")]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
shape = json.load(open(shape_file))
build = lambda: build_model_from_spec(shape_file, shape, seed=0)
mods = {"plain-acc": build(), "ddp-acc": DDP(build()), "plain-none": build(), "ddp-none": DDP(build())}
data = {m: (sample_tokens(shape["vocab"], m, shape["seq_len"], 1 + rank), sample_tokens(shape["vocab"], m, shape["seq_len"], 1001 + rank)) for m in sizes}

def pair(name, m):
    mod = mods[name]; x, y = data[m]
    t0 = time.perf_counter(); loss = F.cross_entropy(mod(x).flatten(0, 1).float(), y.flatten()); t1 = time.perf_counter()
    loss.backward(); t2 = time.perf_counter()
    if name.endswith("none"):
        mod.zero_grad(set_to_none=True)
    return t1 - t0, t2 - t1

cases = [(n, m) for m in sizes for n in mods]
samples = {c: [] for c in cases}
for r in range(repeats + 2):
    for c in (cases if r % 2 == 0 else cases[::-1]):
        dist.barrier()
        f, b = pair(*c)
        if r >= 2:
            samples[c].append((f, b))
med = {}
for c, s in samples.items():
    mine = [statistics.median(x[0] for x in s), statistics.median(x[1] for x in s), statistics.median(x[0] + x[1] for x in s)]
    allr = [None] * world
    dist.all_gather_object(allr, mine)
    med[c] = allr
if rank == 0:
    for m in sizes:
        line = [f"mbs {m}:"]
        for g in ("acc", "none"):
            p, d = med[(f"plain-{g}", m)], med[(f"ddp-{g}", m)]
            comp = max(r[0] for r in d) + max(r[1] for r in d) - max(r[0] for r in p) - max(r[1] for r in p)
            joint = max(r[2] for r in d) - max(r[2] for r in p)
            line.append(f"grads {g:4s}: plain fwd+bwd {1000*max(r[2] for r in p):6.1f} ms, DDP adds {1000*comp:5.1f} ms composed / {1000*joint:5.1f} ms joint;")
        print(" ".join(line))
dist.destroy_process_group()
