"""Just-in-time pipeline receive buffers (autoplan/execute/pp_buffers.py).

- The torch internals the module overrides are still there (else this fails, naming what changed),
  or the installed torch allocates just in time itself and the module steps aside.
- GPipe, 1F1B and interleaved 1F1B with m = 4 x pp micro-batches on 2 gloo processes (the session's
  shared 2-process job, tests/conftest.py) train like one process on the full batch (losses and
  first-step gradients, SGD), and while they run a rank holds no more receive buffers than its
  in-flight micro-batches (the planner's count, ``cost.inflight_vectors``) plus one receive posted
  ahead, none after the step, where torch's stock allocation holds m per chunk.

    pytest tests/test_pp_buffers.py -q
"""

from __future__ import annotations

import pytest
import torch
from torch.distributed.pipelining import PipelineStage

from dist_utils import assert_equivalent, even_stages, reference_run

from autoplan.execute import pp_buffers
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.plan.schedules import inflight_vectors
from autoplan.plan.plan import Layout

SHAPE = BUILTIN_SHAPES["gpt-tiny"].to_dict()   # 4 blocks, h=64, vocab 256, s=32
PP, M, STEPS, LR, SEED = 2, 8, 2, 0.1, 0
LAYOUTS = {s: dict(pp=PP, vp=vp, mbs=1, num_microbatches=M, schedule=s, stages=even_stages(4, PP * vp))
           for s, vp in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2))}


def test_torch_internals_are_the_ones_targeted():
    if pp_buffers.torch_allocates_just_in_time():
        assert pp_buffers.stage_class() is PipelineStage, "torch allocates just in time: use its own stage"
        return
    missing = pp_buffers.missing_internals()
    assert not missing, (f"torch {torch.__version__} changed the pipelining internals that "
                         f"autoplan/execute/pp_buffers.py overrides (written for torch {pp_buffers.TARGET_TORCH}): "
                         f"{missing}; update the module, or use torch's own just-in-time buffers")
    assert pp_buffers.stage_class() is pp_buffers.JitRecvStage
    assert pp_buffers.stage_class(jit=False) is PipelineStage


def _live(stages, table: str) -> int:
    return sum(1 for st in stages for infos in getattr(st, table).values() for i in infos
               if not i.is_root_arg and i.buffer is not None)


def buffers_worker(rank: int, world_size: int, layouts: list[dict]) -> list[tuple[list[float], dict, dict]]:
    """Per layout: (loss per step, full gradients of step 0, receive buffers live at most during a
    step and after it). The counts read torch's descriptors, so they are taken only where
    autoplan's stage is the one in use."""
    from autoplan.execute.apply import parallelize
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import ModelShape, build_model

    s = ModelShape.from_dict(SHAPE)
    out = []
    for d in layouts:
        layout = Layout.from_dict(d)
        par = parallelize(build_model(s, seed=SEED), layout)
        stages = getattr(par.schedule, "_stages", None) or [par.schedule._stage]
        counts = {"act": 0, "grad": 0, "after": 0}
        if all(isinstance(st, pp_buffers.JitRecvStage) for st in stages):
            def watch(fn):
                def call(*args, **kwargs):
                    result = fn(*args, **kwargs)
                    counts["act"] = max(counts["act"], _live(stages, "args_recv_info"))
                    counts["grad"] = max(counts["grad"], _live(stages, "grad_recv_info"))
                    return result
                return call
            for st in stages:
                for name in ("get_fwd_recv_ops", "get_bwd_recv_ops", "forward_one_chunk", "backward_one_chunk"):
                    setattr(st, name, watch(getattr(st, name)))
        opt = torch.optim.SGD(par.parameters(), lr=LR)
        losses, grads = [], {}
        for step in range(STEPS):
            tokens, labels = synthetic_batch(step, layout.global_batch, s.seq_len, s.vocab, SEED)
            losses.append(par.step(par.batch_slice(tokens), par.batch_slice(labels)))
            counts["after"] = max(counts["after"], _live(stages, "args_recv_info") + _live(stages, "grad_recv_info"))
            if step == 0:
                grads = par.full_gradients()
            opt.step()
            opt.zero_grad()
        out.append((losses, grads, counts))
    return out


SHARED_JOBS = {"buffers": (PP, buffers_worker, (list(LAYOUTS.values()),), 150)}   # tests/conftest.py


@pytest.fixture(scope="module")
def results(shared_jobs):
    return shared_jobs.get(__name__, "buffers")


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_jit_buffers_train_like_one_process(results, name):
    i = list(LAYOUTS).index(name)
    ref = reference_run(SHAPE, global_batch=Layout.from_dict(LAYOUTS[name]).global_batch, steps=STEPS, lr=LR,
                        seed=SEED)
    assert_equivalent(ref, [(r[i][0], r[i][1]) for r in results])


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_jit_buffers_only_in_flight(results, name):
    if pp_buffers.stage_class() is not pp_buffers.JitRecvStage:
        pytest.skip("torch's own just-in-time allocation is in use (its descriptors are its own)")
    lay = Layout.from_dict(LAYOUTS[name])
    for rank, r in enumerate(results):
        counts = r[list(LAYOUTS).index(name)][2]
        # activations: the in-flight micro-batches of the chunks that receive, plus one posted ahead
        receiving = [i for i in range(lay.vp) if rank + i * PP > 0]
        in_flight = max(sum(v[i] for i in receiving) for v in inflight_vectors(lay.schedule, PP, lay.vp, M, rank))
        assert counts["act"] <= in_flight + (1 if receiving else 0), (rank, counts, in_flight)
        assert counts["grad"] <= 2, (rank, counts)
        assert counts["after"] == 0, (rank, counts)
    # the stock allocation would hold M of each per chunk: the 1F1B last rank holds one
    if name == "1f1b":
        assert results[PP - 1][1][2]["act"] == 1
