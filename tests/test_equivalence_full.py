"""Every layout family runs and equals one process on the full batch (issue "executor: every plan runs").

ZeRO 0-3, sequence parallel, recompute none/selective/full and the GPipe, 1F1B and interleaved
schedules, on 4 gloo CPU processes (in the session's shared 4-process job, tests/conftest.py), then
PP2 x DP2 x TP2 on 8 processes for 5 steps (in the shared 8-process job). Same model, data, tolerances as
tests/test_equivalence.py.

    python -m pytest tests/test_equivalence_full.py -q
"""

from __future__ import annotations

import pytest

from dist_utils import assert_equivalent, even_stages, layout_key, layouts_worker
from test_equivalence import LR, SEED, SHAPE, STEPS, reference

from autoplan.plan.plan import Layout

PP2, PP2_VP2 = even_stages(4, 2), even_stages(4, 4)

LAYOUTS_4 = {
    "dp4-zero1-full": dict(dp=4, num_microbatches=2, zero=1, recompute="full"),
    "dp4-zero3-selective": dict(dp=4, num_microbatches=2, zero=3, recompute="selective"),
    "dp4-ddp-selective": dict(dp=4, num_microbatches=2, zero=0, recompute="selective"),
    "pp2xdp2-1f1b-zero0-selective": dict(dp=2, pp=2, num_microbatches=2, zero=0, recompute="selective",
                                         stages=PP2),
    "tp2xdp2-zero0-sp-full": dict(dp=2, tp=2, mbs=2, num_microbatches=2, zero=0, sp=1, recompute="full"),
    "tp2xdp2-zero2-sp": dict(dp=2, tp=2, mbs=2, num_microbatches=2, zero=2, sp=1),
    "tp2xdp2-zero3-sp-selective": dict(dp=2, tp=2, mbs=2, num_microbatches=2, zero=3, sp=1,
                                       recompute="selective"),
    "pp2xdp2-gpipe-zero3": dict(dp=2, pp=2, num_microbatches=4, zero=3, schedule="gpipe", stages=PP2),
    "pp2xdp2-1f1b-zero2-full": dict(dp=2, pp=2, num_microbatches=4, zero=2, recompute="full", stages=PP2),
    "pp2xdp2-interleaved-zero0": dict(dp=2, pp=2, vp=2, num_microbatches=4, zero=0, schedule="interleaved",
                                      stages=PP2_VP2),
    "tp2xpp2-interleaved-sp-selective": dict(tp=2, pp=2, vp=2, mbs=2, num_microbatches=2, sp=1,
                                             recompute="selective", schedule="interleaved", stages=PP2_VP2),
}

LAYOUTS_8 = {
    "pp2xdp2xtp2-1f1b-zero1-sp-full": dict(pp=2, dp=2, tp=2, mbs=2, num_microbatches=2, zero=1, sp=1,
                                           recompute="full", stages=PP2),
    "pp2xdp2xtp2-interleaved-zero3-selective": dict(pp=2, dp=2, tp=2, vp=2, mbs=1, num_microbatches=4, zero=3,
                                                    recompute="selective", schedule="interleaved",
                                                    stages=PP2_VP2),
}


SHARED_JOBS = {"layouts_4": (4, layouts_worker, (SHAPE, list(LAYOUTS_4.values()), STEPS, LR, SEED), 200),
               "layouts_8": (8, layouts_worker, (SHAPE, list(LAYOUTS_8.values()), 5, LR, SEED), 200)}


@pytest.fixture(scope="module")
def results_4(shared_jobs):
    return shared_jobs.get(__name__, "layouts_4")


def check(results, d: dict, steps: int) -> None:
    assert_equivalent(reference(Layout.from_dict(d).global_batch, steps), [r[layout_key(d)] for r in results])


@pytest.fixture(scope="module")
def results_8(shared_jobs):
    return shared_jobs.get(__name__, "layouts_8")


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("name", list(LAYOUTS_4))
def test_4_processes(results_4, name):
    check(results_4, LAYOUTS_4[name], steps=STEPS)


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("name", list(LAYOUTS_8))
def test_8_processes_pp2_dp2_tp2(results_8, name):
    check(results_8, LAYOUTS_8[name], steps=5)
