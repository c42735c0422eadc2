"""Opt-in lossy options for slow networks: planned only when allowed, explained, and applied by the
executor (DDP fp16 / PowerSGD hooks, local SGD) with the loss still falling."""

from __future__ import annotations

import copy
import random

import pytest

from planner_instances import random_cluster, random_model_profile

from autoplan.plan.api import Problem, solve_problem
from autoplan.plan.training import TrainingConfig
from autoplan.plan.plan import Layout
from autoplan.plan.search import SearchOptions

STEPS = 8


def lossy_worker(rank: int, world: int, layouts: list[dict]) -> dict:
    import torch

    import autoplan
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.shapes import BUILTIN_SHAPES
    from autoplan.models.transformer import build_model

    torch.manual_seed(0)
    shape = BUILTIN_SHAPES["gpt-tiny"]
    out = {}
    for d in layouts:
        lay = Layout.from_dict(d)
        par = autoplan.parallelize(build_model(shape, seed=0), lay)
        opt = torch.optim.SGD(par.parameters(), lr=0.2)
        losses, same = [], []
        for step in range(STEPS):
            tokens, labels = synthetic_batch(step, lay.global_batch, shape.seq_len, shape.vocab, 0)
            losses.append(par.step(par.batch_slice(tokens), par.batch_slice(labels)))
            opt.step()
            par.after_optimizer_step()
            opt.zero_grad(set_to_none=True)
            # are the replicas' weights equal after this step? (max over ranks of the difference)
            w = next(par.parameters()).detach().clone()
            ref = w.clone()
            torch.distributed.broadcast(ref, src=0)
            diff = torch.tensor([float((w - ref).abs().max())])
            torch.distributed.all_reduce(diff, op=torch.distributed.ReduceOp.MAX)
            same.append(float(diff) == 0.0)
        out[lay.short()] = {"losses": losses, "replicas_equal": same}
    return out


BASE = dict(dp=4, mbs=2, num_microbatches=1)
LAYOUTS = [BASE, {**BASE, "grad_compression": "fp16"}, {**BASE, "grad_compression": "powersgd"},
           {**BASE, "sync_every": 2}]
SHARED_JOBS = {"lossy": (4, lossy_worker, (LAYOUTS,), 240)}    # in the session's 4-process job (tests/conftest.py)


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_lossy_options_train_and_loss_falls(shared_jobs):
    res = shared_jobs.get(__name__, "lossy")[0]
    exact = res[Layout(**BASE).short()]["losses"]
    for d in LAYOUTS[1:]:
        r = res[Layout(**d).short()]
        assert r["losses"][-1] < r["losses"][0] - 0.05, (d, r["losses"])        # still learns
        assert abs(r["losses"][-1] - exact[-1]) < 0.1 * exact[-1]               # and about as well
    assert res[Layout(**LAYOUTS[1]).short()]["losses"] != exact                # the hook really ran
    local = res[Layout(**LAYOUTS[3]).short()]["replicas_equal"]
    assert local == [i % 2 == 0 for i in range(STEPS)]    # averaged every 2nd step, apart in between
    assert all(res[Layout(**BASE).short()]["replicas_equal"])


def test_planner_uses_lossy_options_only_when_allowed_and_says_so():
    rng = random.Random(3)
    prof = random_model_profile(rng, n_blocks=4)
    cluster = random_cluster(rng, world=4, memory_bytes=2**34)
    for fits in cluster.links["intra_node"].values():     # a very slow network between the replicas
        for f in fits.values():
            f.bandwidth_bytes_per_s /= 1000
    pb = Problem(prof, cluster, TrainingConfig(global_batch=8), "m", "c")
    fixed = {"dp": 4}
    exact = solve_problem(pb, SearchOptions(fixed=dict(fixed)))
    assert not exact.layout.lossy
    lossy = solve_problem(pb, SearchOptions(fixed=dict(fixed), allow_lossy=("fp16", "powersgd", "localsgd")))
    assert lossy.layout.lossy
    assert lossy.predicted.step_time_s < exact.predicted.step_time_s
    assert any(line.startswith("LOSSY") for line in lossy.explanation)
    assert any(a.family == "best exact layout" for a in lossy.alternatives)
    # a dp sync that is not the bottleneck: compression cannot pay, so it is not chosen even if allowed
    fast = copy.deepcopy(pb)
    for fits in fast.cluster.links["intra_node"].values():
        for f in fits.values():
            f.bandwidth_bytes_per_s *= 1e6
            f.latency_s = 0.0
    assert not solve_problem(fast, SearchOptions(fixed=dict(fixed), allow_lossy=("fp16",))).layout.lossy


def test_search_options_refuse_what_the_cli_refuses():
    """The Python API checks what ``autoplan solve`` checks (the CLI only turns the error into exit 2):
    an unknown lossy option is refused, not ignored; top-k, the time limit and the solver too."""
    from autoplan.errors import InputError
    with pytest.raises(InputError, match=r"--allow-lossy: unknown option\(s\) gzip \(known: fp16, powersgd, localsgd\)"):
        SearchOptions(allow_lossy=("fp16", "gzip"))
    with pytest.raises(InputError, match="--top-k must be from 0 to 100, got 101"):
        SearchOptions(top_k=101)
    for bad in (0.0, -1.0, float("nan"), 1e9):
        with pytest.raises(InputError, match="--time-limit must be > 0 and at most 86400 seconds"):
            SearchOptions(ilp_time_limit_s=bad)
    with pytest.raises(InputError, match="unknown ILP solver 'glpk'"):
        SearchOptions(solver="glpk")
    assert SearchOptions(allow_lossy=["fp16", "localsgd"]).allow_lossy == ("fp16", "localsgd")


def test_top_k_zero_keeps_the_chosen_layout():
    """``solve --top-k 0`` passes the check above; it keeps the chosen layout (it once kept nothing and
    then said the model fits nowhere)."""
    from autoplan.plan.api import solve
    plan = solve("gpt-tiny", "dgx-a100-80gb:1", 8, options=SearchOptions(top_k=0))
    assert plan.layout.world_size == 8 and plan.predicted.fits
