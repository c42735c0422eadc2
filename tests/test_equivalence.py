"""Sharded training equals one process on the full batch: 4 gloo CPU processes, gpt-tiny, fp32, SGD.

Each layout trains 3 steps from the same initialisation and data as the single-process reference;
losses match to 1e-5 relative and the gradients of the first step (gathered to full tensors from
TP/FSDP shards and from every pipeline stage) match the reference's. All layouts of this file run in
the session's shared 4-process job (tests/conftest.py: the machine has 2 cores, and process start-up
is much of the cost).

    pytest tests/test_equivalence.py -q
"""

from __future__ import annotations

import functools

import pytest

from dist_utils import assert_equivalent, even_stages, layout_key, layouts_worker, reference_run

from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.plan.plan import Layout

SHAPE = BUILTIN_SHAPES["gpt-tiny"].to_dict()   # 4 blocks, h=64, 4 heads, vocab 256, s=32
STEPS, LR, SEED = 3, 0.1, 0

LAYOUTS = {
    "dp4": dict(dp=4, mbs=1, num_microbatches=2),
    "tp2xdp2": dict(dp=2, tp=2, mbs=2, num_microbatches=2),
    "pp2xdp2": dict(dp=2, pp=2, mbs=1, num_microbatches=4, schedule="1f1b", stages=even_stages(4, 2)),
    "tp2xpp2": dict(tp=2, pp=2, mbs=2, num_microbatches=4, schedule="gpipe", stages=even_stages(4, 2)),
    "pp4-uneven": dict(pp=4, mbs=2, num_microbatches=4, schedule="1f1b",
                       stages=[["embed", "block.0"], ["block.1"], ["block.2", "block.3"], ["head"]]),
    # per-block recompute modes, as the planner's per-layer recompute chooses them
    "pp2xdp2-mixed-recompute": dict(dp=2, pp=2, mbs=1, num_microbatches=4, schedule="1f1b", stages=even_stages(4, 2),
                                    recompute_layers={"block.0": "full", "block.1": "selective", "block.3": "full"}),
}


SHARED_JOBS = {"layouts": (4, layouts_worker, (SHAPE, list(LAYOUTS.values()), STEPS, LR, SEED), 150)}


@pytest.fixture(scope="module")
def results(shared_jobs):
    return shared_jobs.get(__name__, "layouts")


@functools.cache
def reference(global_batch: int, steps: int = STEPS) -> tuple[list[float], dict]:
    """The single-process reference of ``steps`` SGD steps on ``global_batch`` (computed once)."""
    return reference_run(SHAPE, global_batch=global_batch, steps=steps, lr=LR, seed=SEED)


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_layout_matches_single_process(results, name):
    d = LAYOUTS[name]
    assert_equivalent(reference(Layout.from_dict(d).global_batch), [r[layout_key(d)] for r in results])
