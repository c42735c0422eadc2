"""A SwiGLU (Llama-style) MLP under tensor parallelism equals one process: the gate w3 is split
column-wise like w1 (2 gloo CPU processes, in the session's shared 2-process job, fp32, SGD)."""

from __future__ import annotations

import dataclasses

import pytest

from dist_utils import assert_equivalent, layout_key, layouts_worker, reference_run

from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.plan.plan import Layout

SHAPE = dataclasses.replace(BUILTIN_SHAPES["gpt-tiny"], name="swiglu-tiny", mlp="swiglu").to_dict()
STEPS, LR, SEED = 2, 0.1, 0
TP2 = dict(tp=2, mbs=2, num_microbatches=2)


SHARED_JOBS = {"tp2": (2, layouts_worker, (SHAPE, [TP2], STEPS, LR, SEED), 150)}   # tests/conftest.py


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_swiglu_tensor_parallel_matches_single_process(shared_jobs):
    results = shared_jobs.get(__name__, "tp2")
    ref = reference_run(SHAPE, global_batch=Layout.from_dict(TP2).global_batch, steps=STEPS, lr=LR, seed=SEED)
    assert_equivalent(ref, [r[layout_key(TP2)] for r in results])
