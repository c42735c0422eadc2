"""Fixtures shared by several test files (each spawned multi-process job costs seconds of process start-up)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def equivalence_4_processes() -> list[dict]:
    """Each rank's results by layout key for the layouts of test_equivalence.py and the 4-process ones of
    test_equivalence_full.py (the same model, data and steps), trained in ONE spawned 4-process job."""
    from dist_utils import layouts_worker, run_on_ranks
    from test_equivalence import LAYOUTS, LR, SEED, SHAPE, STEPS
    from test_equivalence_full import LAYOUTS_4

    layouts = [*LAYOUTS.values(), *LAYOUTS_4.values()]
    return run_on_ranks(layouts_worker, 4, args=(SHAPE, layouts, STEPS, LR, SEED), timeout_s=280)
