"""One resolver for every model spec form (autoplan.models.source)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from autoplan.errors import InputError
from autoplan.models import source as source_module
from autoplan.models.shapes import BUILTIN_SHAPES, forward_flops_per_sample
from autoplan.models.source import SPEC_FORMS, resolve_model, resolve_plan_model
from autoplan.models.transformer import REFERENCE_TP_PLAN, SWIGLU_TP_PLAN, build_model

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "user_model.py"
SHAPE = dict(layers=2, hidden=32, heads=2, kv_heads=2, ffn_hidden=64, vocab=50, seq_len=8)


def test_each_form_resolves_to_its_form(tmp_path):
    shape_file = tmp_path / "small.json"
    shape_file.write_text(json.dumps(SHAPE))
    profile_file = tmp_path / "model.json"
    profile_file.write_text(json.dumps({"kind": "model_profile"}))
    got = {spec: resolve_model(spec) for spec in
           ["gpt-tiny", str(shape_file), str(profile_file), "hf:gpt2-tiny", f"{EXAMPLE}:build"]}
    assert [m.form for m in got.values()] == ["builtin", "shape_file", "profile_file", "hf", "factory"]
    assert all(m.spec == spec for spec, m in got.items())              # the spec as given is kept
    assert got["gpt-tiny"].shape == BUILTIN_SHAPES["gpt-tiny"] and not got["gpt-tiny"].built_per_unit
    assert got[str(shape_file)].shape.name == "small" and got[str(shape_file)].shape.hidden == 32
    assert resolve_model(shape_file).shape == got[str(shape_file)].shape      # a Path is taken as its string
    assert got[str(profile_file)].shape is None
    assert got["hf:gpt2-tiny"].built_per_unit and got["hf:gpt2-tiny"].shape.layers == 4
    assert got[f"{EXAMPLE}:build"].shape is None and got[f"{EXAMPLE}:build"].path == EXAMPLE


def test_the_docstring_names_one_function_per_form():
    doc = source_module.__doc__
    for form in SPEC_FORMS:
        rows = [m for m in (re.search(rf"\s{form}\s+(_?\w+)\(", line) for line in doc.splitlines()) if m]
        assert len(rows) == 1, (form, rows)
        name = rows[0].group(1)
        assert callable(getattr(source_module, name)), name


@pytest.mark.parametrize("spec, message", [("gpt-nonexistent", "unknown model"),
                                           ("missing.json", "model file not found")])
def test_unknown_specs_are_refused(spec, message):
    with pytest.raises(InputError, match=message):
        resolve_model(spec)


def test_a_profile_cannot_be_built(tmp_path):
    p = tmp_path / "model.json"
    p.write_text(json.dumps({"kind": "model_profile"}))
    with pytest.raises(InputError, match="model profile"):
        resolve_model(str(p)).build()


def test_builtin_builds_the_reference_transformer_and_answers_from_its_shape():
    m = resolve_model("gpt-tiny")
    model = m.build(seed=3)
    ref = build_model(BUILTIN_SHAPES["gpt-tiny"], seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))
    assert m.unit_names() == model.unit_names() and m.edges()[0] == ("embed", "block.0")
    assert m.tp_plan() is REFERENCE_TP_PLAN and resolve_model("llama3-8b").tp_plan() is SWIGLU_TP_PLAN
    assert m.forward_flops_per_sample("block", 16) == forward_flops_per_sample("block", m.shape, 16)
    assert m.forward_flops_per_sample("block_1", 16) == 0.0


def test_a_factory_answers_from_the_built_model():
    m = resolve_model(f"{EXAMPLE}:build")
    model = m.build()
    assert m.unit_names(model) == model.unit_names()
    assert m.forward_flops_per_sample("block", 8) == 0.0


def test_plan_model_uses_the_recorded_shape():
    recorded = {"name": "gone", **SHAPE}
    m = resolve_plan_model("gone.json", recorded)             # the shape file need not exist any more
    assert m.form == "recorded_shape" and m.build().unit_names() == ["embed", "block.0", "block.1", "head"]
    assert resolve_plan_model("gpt-tiny", None).shape == BUILTIN_SHAPES["gpt-tiny"]
    with pytest.raises(InputError, match="records no transformer shape"):
        resolve_plan_model("gone.json", None)
    with pytest.raises(InputError, match="does not match"):
        resolve_plan_model("hf:gpt2-tiny", {**SHAPE, "layers": 9}).build()
