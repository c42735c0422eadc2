"""The executor's data-parallel step (measure._trainer) at two layouts, timed in turn by parts."""
import sys, statistics as st, torch, torch.distributed as dist
from autoplan.execute import measure as M
from autoplan.execute.group_measure import _agree_max, _timed
from autoplan.execute.token_data import model_vocab
from autoplan.plan.plan import Plan
from autoplan.execute.data import synthetic_batch
torch.set_num_threads(1)
dist.init_process_group("gloo")
plans = [Plan.load(f) for f in sys.argv[1:3]]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 16
tr = [M._trainer(p, 0) for p in plans]
dev = torch.device("cpu")
def timed(fn):
    """seconds of ``fn()`` behind a barrier, the slowest rank's"""
    return _agree_max(_timed(fn, dev))
res = {}
for r in range(rounds + 2):
    for k, (par, opt, one_step) in enumerate(tr):
        lay = plans[k].layout
        tokens, labels = synthetic_batch(r, lay.global_batch, plans[k].training.seq_len, model_vocab(plans[k].training.model_spec), 0)
        t, y = par.batch_slice(tokens), par.batch_slice(labels)
        parts = {}
        parts["full step"] = timed(lambda: one_step(r))
        parts["par.step"] = timed(lambda: par.step(t, y))
        parts["optimizer"] = timed(lambda: (par.optimizer_step(opt), opt.zero_grad(set_to_none=True)))
        def fb():
            n = lay.num_microbatches
            for i, (a, b) in enumerate(zip(t.chunk(n), y.chunk(n))):
                (par.loss_fn(par.runners[0](a), b) / n).backward()
        parts["fwd+bwd, DDP syncing every micro-batch"] = timed(fb)
        opt.zero_grad(set_to_none=True)
        if r >= 2:
            for name, v in parts.items():
                res.setdefault((k, name), []).append(v)
if dist.get_rank() == 0:
    for name in ["full step", "par.step", "optimizer", "fwd+bwd, DDP syncing every micro-batch"]:
        a, b = st.median(res[(0, name)]), st.median(res[(1, name)])
        print(f"{name:40s} {plans[0].layout.short()[:18]}: {a*1e3:7.1f} ms  {plans[1].layout.short()[:18]}: {b*1e3:7.1f} ms  ratio {a/b:.3f}")
dist.destroy_process_group()
