"""benchmarks/published_recipes.py: the transcribed recipes are self-consistent (fast, data only)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

_BENCHMARKS = str(Path(__file__).resolve().parent.parent / "benchmarks")


@pytest.fixture(scope="module")
def mod():
    """The data module, imported by name (it imports nothing of autoplan)."""
    sys.path.insert(0, _BENCHMARKS)
    try:
        return importlib.import_module("published_recipes")
    finally:
        sys.path.remove(_BENCHMARKS)


def test_layouts_fit_their_world_batch_and_model(mod):
    for r in mod.RECIPES:
        lay, sh = r.layout, r.shape
        assert lay.dp * lay.tp * lay.pp * lay.cp == r.num_gpus, r.name
        assert lay.global_batch % (lay.dp * lay.mbs) == 0, r.name
        assert sh.kv_heads > 0 and sh.heads % sh.kv_heads == 0 and sh.heads % lay.tp == 0, r.name
        assert sh.hidden % sh.heads == 0, r.name
        assert sh.seq_len % (2 * lay.cp) == 0, r.name          # causal load balancing: 2 chunks per cp rank
        assert lay.vp == 1 or lay.pp > 1, r.name
        chunks = lay.pp * lay.vp
        # an uneven pipeline split is only allowed where the recipe says how the layers were placed
        assert sh.layers % chunks == 0 or "layers" in lay.notes, r.name
        assert lay.recompute in ("none", "selective", "full"), r.name
        assert lay.recompute_layers is None or (lay.recompute == "full" and lay.recompute_layers > 0), r.name
        assert lay.zero in (0, 1, 2, 3) and (lay.sp == (lay.tp > 1)), r.name
        assert lay.fp8 == bool(lay.fp8_recipe), r.name
        assert (lay.cp > 1) == bool(lay.cp_comm), r.name


def test_step_times_follow_from_the_published_metric(mod):
    for r in mod.RECIPES:
        assert r.step_time_s > 0 and r.metric_value > 0 and r.derivation, r.name
        assert f"{r.metric_value:g}" in r.metric.replace(",", ""), r.name     # the figure as printed
        if r.metric_unit == "s/step":
            assert r.step_time_s == r.metric_value, r.name
        elif r.metric_unit == "tokens/s/GPU":
            t = r.layout.global_batch * r.shape.seq_len / (r.num_gpus * r.metric_value)
            assert r.step_time_s == pytest.approx(t, rel=1e-12), r.name
        else:
            assert r.metric_unit == "TFLOP/s/GPU", r.name
            t = r.layout.global_batch * mod.nemo_llama2_flops_per_sequence(r.shape) / (r.num_gpus * r.metric_value
                                                                                      * 1e12)
            assert r.step_time_s == pytest.approx(t, rel=1e-12), r.name


def test_nemo_flop_formula_reproduces_a_published_pair(mod):
    # [NEMO24] LLAMA2-7B, 4096: 16934 tokens/s/GPU and 780 model TFLOP/s per GPU in the same row
    per_token = mod.nemo_llama2_flops_per_sequence(mod.LLAMA2_7B) / mod.LLAMA2_7B.seq_len
    assert 16934 * per_token / 1e12 == pytest.approx(780, abs=1)


def test_every_recipe_cites_a_listed_source_and_the_set_covers_the_issue(mod):
    listed = set(re.findall(r"^- (\[[A-Z0-9]+\])", mod.__doc__, flags=re.M))
    recipes = mod.RECIPES
    assert {r.source for r in recipes} <= listed
    assert {r.source for r in recipes} == listed                 # no source listed without a recipe
    assert len({r.name for r in recipes}) == len(recipes)
    assert {r.gpu for r in recipes} <= {"h100", "h200", "a100"}
    assert {r.framework for r in recipes} <= {"megatron", "torchtitan", "deepspeed"}
    assert all(r.row and r.framework_version for r in recipes)
    new = [r for r in recipes if r.layout.fp8 or r.layout.cp > 1]
    assert len(new) >= 20 and len({r.source for r in new}) >= 4
    assert sum(r.layout.cp > 1 for r in recipes) >= 10 and sum(not r.layout.fp8 for r in recipes) >= 5
