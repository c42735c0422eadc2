"""A SwiGLU (Llama-style) MLP under tensor parallelism equals one process: the gate w3 is split
column-wise like w1 (2 gloo CPU processes, fp32, SGD)."""

from __future__ import annotations

import dataclasses

import pytest

from dist_utils import assert_equivalent, layout_key, layouts_worker, reference_run, run_on_ranks

from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.plan.plan import Layout

SHAPE = dataclasses.replace(BUILTIN_SHAPES["gpt-tiny"], name="swiglu-tiny", mlp="swiglu").to_dict()
STEPS, LR, SEED = 2, 0.1, 0
TP2 = dict(tp=2, mbs=2, num_microbatches=2)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_swiglu_tensor_parallel_matches_single_process():
    results = run_on_ranks(layouts_worker, 2, args=(SHAPE, [TP2], STEPS, LR, SEED), timeout_s=150)
    ref = reference_run(SHAPE, global_batch=Layout.from_dict(TP2).global_batch, steps=STEPS, lr=LR, seed=SEED)
    assert_equivalent(ref, [r[layout_key(TP2)] for r in results])
