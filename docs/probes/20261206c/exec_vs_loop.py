"""One layout per job: the executor's training step against a bare loop over the executor's own DDP module.

    torchrun --nproc-per-node 2 docs/probes/20261206c/exec_vs_loop.py PLAN.json [ROUNDS]

Per round, one step each, alternating: ``exec`` (measure._trainer's one_step: the synthetic batch, par.step,
par.optimizer_step, zero_grad) and ``loop`` (the same module, optimizer and rows: zero_grad, per micro-batch
the gradient-sync switch, loss / m, backward; AdamW's step). Slowest rank, median over rounds."""
import statistics as st, sys
import torch, torch.distributed as dist
from autoplan.execute import measure as M
from autoplan.execute.data import synthetic_batch
from autoplan.execute.dp import set_gradient_sync
from autoplan.execute.group_measure import _agree_max, _timed
from autoplan.execute.token_data import model_vocab
from autoplan.plan.plan import Plan

torch.set_num_threads(1)
dist.init_process_group("gloo")
plan = Plan.load(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 16
par, opt, one_step = M._trainer(plan, 0)
lay = plan.layout
tokens, labels = synthetic_batch(0, lay.global_batch, plan.training.seq_len, model_vocab(plan.training.model_spec), 0)
t_rows, y_rows = par.batch_slice(tokens), par.batch_slice(labels)
ddp = par.runners[0]


def loop():
    opt.zero_grad(set_to_none=True)
    n = lay.num_microbatches
    for i, (t, y) in enumerate(zip(t_rows.chunk(n), y_rows.chunk(n))):
        set_gradient_sync(ddp, i == n - 1)
        (par.loss_fn(ddp(t), y) / n).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def timed(fn):
    """seconds of ``fn()`` behind a barrier, the slowest rank's"""
    return _agree_max(_timed(fn, torch.device("cpu")))


got = {"exec": [], "loop": []}
for r in range(rounds + 3):
    a = timed(lambda: one_step(r))
    b = timed(loop)
    if r >= 3:
        got["exec"].append(a)
        got["loop"].append(b)
if dist.get_rank() == 0:
    print(f"{lay.short()}: exec {st.median(got['exec']) * 1e3:.1f} ms, loop {st.median(got['loop']) * 1e3:.1f} ms "
          f"(medians of {rounds})")
dist.destroy_process_group()
