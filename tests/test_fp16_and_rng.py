"""fp16 loss scaling across the executor's wrappers, and RNG / loss-scaler state in checkpoints.

- An overflowing loss scale (2^40: every fp16 backward overflows) makes the first optimizer step a
  no-op on EVERY rank, and halves the scale everywhere alike, under FSDP2 fp16 mixed precision
  (DP2 ZeRO-3), autocast with DTensor gradients (TP2), autocast under a pipeline schedule (PP2)
  and on one process; with a sane scale the same layout then trains (loss finite and falling).
- A checkpoint restores each rank's torch and Python RNG streams (the numbers drawn after the load
  are those drawn after the save) and the fp16 loss scale.

Two gloo CPU processes (in the session's shared 2-process job, tests/conftest.py; one process for the
single-process case), gpt-tiny.

    python -m pytest tests/test_fp16_and_rng.py -q
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dist_utils import even_stages, run_on_ranks

from autoplan.models.shapes import BUILTIN_SHAPES

SHAPE = BUILTIN_SHAPES["gpt-tiny"].to_dict()
OVERFLOW_SCALE = 2.0 ** 40

LAYOUTS_2 = {
    "dp2-zero3-fsdp-fp16": dict(dp=2, zero=3, num_microbatches=2),
    "tp2-autocast-dtensor": dict(tp=2, mbs=2, num_microbatches=1),
    "pp2-autocast-schedule": dict(pp=2, num_microbatches=2, stages=even_stages(4, 2)),
}


def fp16_worker(rank: int, world_size: int, layouts: list[dict]) -> list[dict]:
    import torch
    from torch.distributed.tensor import DTensor

    from autoplan.execute.apply import parallelize
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import ModelShape, build_model
    from autoplan.plan.plan import Layout

    s = ModelShape.from_dict(SHAPE)
    out = []
    for d in layouts:
        layout = Layout.from_dict(d)
        par = parallelize(build_model(s, seed=0), layout, precision="fp16")
        opt = torch.optim.SGD(par.parameters(), lr=0.5)

        def local(p):
            return (p.to_local() if isinstance(p, DTensor) else p).detach().clone()

        def one_step(step: int) -> float:
            tokens, labels = synthetic_batch(step, layout.global_batch, s.seq_len, s.vocab, 0)
            loss = par.step(par.batch_slice(tokens), par.batch_slice(labels))
            par.optimizer_step(opt)
            opt.zero_grad()
            return loss

        before = [local(p) for p in par.parameters()]
        par.grad_scaler.update(new_scale=OVERFLOW_SCALE)
        first_loss = one_step(0)
        unchanged = all(torch.equal(a, local(p)) for a, p in zip(before, par.parameters()))
        scale_after_overflow = par.grad_scaler.get_scale()
        par.grad_scaler.update(new_scale=2.0 ** 10)
        losses = [one_step(i) for i in range(4)]
        out.append({"first_loss": first_loss, "unchanged": unchanged, "scale_after_overflow": scale_after_overflow,
                    "losses": losses, "scale_end": par.grad_scaler.get_scale()})
    return out


@pytest.fixture(scope="module")
def fp16_results(shared_jobs):
    two = shared_jobs.get(__name__, "fp16")
    one = run_on_ranks(fp16_worker, 1, args=([dict(num_microbatches=2)],), timeout_s=60)
    return {**{name: [r[i] for r in two] for i, name in enumerate(LAYOUTS_2)}, "one-process": [one[0][0]]}


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("name", [*LAYOUTS_2, "one-process"])
def test_fp16_overflow_skips_the_step_on_every_rank_then_trains(fp16_results, name):
    ranks = fp16_results[name]
    for r in ranks:
        assert math.isfinite(r["first_loss"]), "the reported loss must be the unscaled one"
        assert r["unchanged"], "an overflowing step changed parameters"
        assert r["scale_after_overflow"] == OVERFLOW_SCALE / 2, r["scale_after_overflow"]
        assert r["scale_end"] == 2.0 ** 10, "no overflow expected at a sane scale"
        assert all(math.isfinite(x) for x in r["losses"]), r["losses"]
        assert r["losses"][-1] < r["losses"][0] - 0.05, f"fp16 loss does not fall: {r['losses']}"
        assert 4.0 < r["first_loss"] < 7.0, "the loss returned must not be the scaled one"
    assert all(r["losses"] == ranks[0]["losses"] for r in ranks), "ranks disagree on the loss"


def rng_worker(rank: int, world_size: int, root: str) -> dict:
    import random

    import torch

    from autoplan.execute.apply import parallelize
    from autoplan.execute.checkpoint import load, save
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import ModelShape, build_model
    from autoplan.plan.plan import Layout

    s = ModelShape.from_dict(SHAPE)
    layout = Layout.from_dict(dict(dp=2, num_microbatches=1))
    par = parallelize(build_model(s, seed=0), layout, precision="fp16")
    opt = torch.optim.SGD(par.parameters(), lr=0.1)
    tokens, labels = synthetic_batch(0, layout.global_batch, s.seq_len, s.vocab, 0)
    par.step(par.batch_slice(tokens), par.batch_slice(labels))
    par.optimizer_step(opt)
    opt.zero_grad()
    torch.manual_seed(1000 + rank)          # each rank its own stream
    random.seed(2000 + rank)
    par.grad_scaler.update(new_scale=1024.0)
    save(par, opt, 1, root)
    after_save = (torch.rand(4).tolist(), random.random())
    torch.manual_seed(7)                    # disturb everything the checkpoint should restore
    random.seed(7)
    par2 = parallelize(build_model(s, seed=1), layout, precision="fp16")
    opt2 = torch.optim.SGD(par2.parameters(), lr=0.1)
    step = load(par2, opt2, root)
    after_load = (torch.rand(4).tolist(), random.random())
    return {"step": step, "after_save": after_save, "after_load": after_load, "scale": par2.grad_scaler.get_scale()}


SHARED_JOBS = {"fp16": (2, fp16_worker, (list(LAYOUTS_2.values()),), 150),    # tests/conftest.py
               "rng": (2, rng_worker, lambda tmp: (str(tmp / "ckpt"),), 90)}


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_checkpoint_restores_rng_streams_and_loss_scale(shared_jobs):
    res = shared_jobs.get(__name__, "rng")
    root = Path(shared_jobs.args(__name__, "rng")[0])
    for r in res:
        assert r["step"] == 1
        assert r["after_load"] == r["after_save"], "RNG streams not restored"
        assert r["scale"] == 1024.0
    assert res[0]["after_save"] != res[1]["after_save"], "each rank keeps its own stream"
    assert sorted(p.name for p in (root / "step_00000001").glob("rank_state_*.pt")) == \
        ["rank_state_0.pt", "rank_state_1.pt"]
