"""The model the user named: every model spec resolved once, into one :class:`ModelSource`.

Which function resolves each spec form (:func:`resolve_model` tells the forms apart by their syntax
alone and calls exactly one of them)::

    spec                           form            resolved by           the model
    gpt-tiny, llama3-8b, ...       builtin         _builtin(spec)        reference Transformer of a built-in shape
    path/shape.json                shape_file      _shape_file(spec, d)  reference Transformer of the file's shape
    path/model.json (a profile)    profile_file    _json_file(spec)      none: a measured or analytic model profile,
                                                                         taken by the planner as it is
    hf:NAME[,key=value,...]        hf              _hf(spec)             autoplan.models.hf adapter, random init;
      or hf:DIR (a checkpoint)                                           for DIR with load_weights, its weights
                                                                         read shard by shard into the layout
    path/to/file.py:factory        factory         _factory(spec)        the user's factory (autoplan.models.factory)
    a plan's model_spec + shape    recorded_shape  resolve_plan_model()  reference Transformer of the recorded shape
                                                                         (hf: and factory specs resolve as above)

A ``.json`` spec is read once (:func:`_json_file`) to see whether it is a model profile or a shape; a
profile's contents are kept (``profile_json``) for the planner to load without reading the file again.
``hf:`` and factory specs are not loaded when resolved: their config or file is read when the shape
is asked for or the model is built, so resolving stays cheap and errors name the step that failed.

What a :class:`ModelSource` answers: its transformer ``shape`` (built-in, shape file, recorded, or
an ``hf:`` config's; None for factory models and profiles); whether it is measured as a built
model, unit by unit (``built_per_unit``: ``hf:``/factory), or per layer kind of the reference
transformer; ``build()`` the whole model; ``unit_names()`` and ``edges()``; ``tp_plan()``;
``forward_flops_per_sample()`` (analytic, from the shape). Profile (``profile_model``), plan
(``make_problem``), execute (``measure``, group profiling, elastic re-plans) take it.

Run::

    python -c "from autoplan.models.source import resolve_model; print(resolve_model('gpt-tiny'))"
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch.nn as nn

from autoplan.errors import InputError
from autoplan.jsonio import read_json
from autoplan.models.factory import build_factory_model, is_factory_spec
from autoplan.models.hf import build_hf_model, hf_shape, is_hf_spec
from autoplan.models.shapes import BUILTIN_SHAPES, ModelShape, forward_flops_per_sample
from autoplan.models.transformer import LAYER_KINDS, REFERENCE_TP_PLAN, SWIGLU_TP_PLAN, build_model, unit_names
from autoplan.models.units import TensorParallelPlan

SPEC_FORMS = ("builtin", "shape_file", "profile_file", "hf", "factory", "recorded_shape")


@dataclass(frozen=True)
class ModelSource:
    """A resolved model spec (see the module docstring for the forms)."""

    spec: str
    """the spec as the user (or the plan) gave it"""
    form: str
    """one of ``SPEC_FORMS``"""
    path: Path | None = None
    """the shape, profile or factory file, for those forms"""
    known_shape: ModelShape | None = None
    """the shape when the spec itself holds it (builtin, shape_file, recorded_shape)"""
    recorded_shape: dict | None = None
    """a plan's recorded ``training.shape`` that an ``hf:`` model must match when built"""
    profile_json: dict | None = field(default=None, compare=False, repr=False)
    """a model profile file's contents, as read once to tell a profile from a shape (profile_file)"""

    @property
    def shape(self) -> ModelShape | None:
        """The transformer shape, or None (a factory model, a model profile). For ``hf:`` it is read
        from the transformers config (not cached: resolving stays cheap)."""
        if self.form == "hf":
            return hf_shape(self.spec)
        return self.known_shape

    @property
    def built_per_unit(self) -> bool:
        """``hf:`` and factory models are built and measured unit kind by unit kind; shapes are measured
        per layer kind of the reference transformer."""
        return self.form in ("hf", "factory")

    def build(self, seed: int = 0, *, load_weights: bool = False) -> nn.Module:
        """The whole model on CPU in fp32, initialised from ``seed`` (each rank of a job rebuilds the same).
        ``load_weights`` with ``hf:DIR``: on the meta device, its checkpoint's weights to be read by
        :func:`autoplan.parallelize` into each rank's shards (see :mod:`autoplan.models.hf`)."""
        if self.form == "hf":
            model = build_hf_model(self.spec, seed, load_weights=load_weights)
            _check_recorded_shape(self.spec, model.shape, self.recorded_shape)
            return model
        if self.form == "factory":
            return build_factory_model(self.spec, seed)
        if self.known_shape is None:
            raise InputError(f"{self.spec} is a model profile: it describes a model but cannot build one; "
                             f"give the model spec it was made from")
        model = build_model(self.known_shape, seed=seed)
        model.spec = self.spec
        return model

    def unit_names(self, model: nn.Module | None = None) -> list[str]:
        """The pipeline units in execution order: from the shape, else from ``model`` (built when not given)."""
        if not self.built_per_unit and self.known_shape is not None:
            return unit_names(self.known_shape)
        return (model if model is not None else self.build()).unit_names()

    def edges(self, model: nn.Module | None = None) -> list[tuple[str, str]]:
        """The chain of units: (unit, next unit) pairs."""
        names = self.unit_names(model)
        return list(zip(names, names[1:]))

    def tp_plan(self, model: nn.Module | None = None) -> TensorParallelPlan | None:
        """Which linears of a block tensor parallel splits; None when the model has no TP plan."""
        if not self.built_per_unit and self.known_shape is not None:
            return SWIGLU_TP_PLAN if self.known_shape.mlp == "swiglu" else REFERENCE_TP_PLAN
        plan = getattr(model if model is not None else self.build(), "tp_plan", None)
        return plan if isinstance(plan, TensorParallelPlan) else None

    def forward_flops_per_sample(self, kind: str, seq_len: int) -> float:
        """Analytic forward FLOPs of one ``kind`` layer (``embed``/``block``/``head``) on one sequence;
        0 without a transformer shape or for another kind of unit."""
        shape = self.shape
        if shape is None or kind not in LAYER_KINDS:
            return 0.0
        return forward_flops_per_sample(kind, shape, seq_len)


def resolve_model(spec: str | os.PathLike) -> ModelSource:
    """The model ``spec`` names (any form of the module docstring's table but ``recorded_shape``; a
    path is taken as its string)."""
    spec = os.fspath(spec)
    if is_hf_spec(spec):
        return _hf(spec)
    if is_factory_spec(spec):
        return _factory(spec)
    if spec in BUILTIN_SHAPES:
        return _builtin(spec)
    p = Path(spec)
    if p.suffix == ".json" and p.exists():
        return _json_file(spec)
    if p.suffix == ".json":
        raise InputError(f"model file not found: {spec}")
    raise InputError(f"unknown model {spec!r}: give a built-in name ({', '.join(BUILTIN_SHAPES)}), "
                     f"a shape JSON file or a model profile JSON file")


def as_model_source(model: str | ModelSource) -> ModelSource:
    """``model`` itself when already resolved, else :func:`resolve_model` of it."""
    return model if isinstance(model, ModelSource) else resolve_model(model)


def resolve_plan_model(model_spec: str, recorded_shape: dict | None) -> ModelSource:
    """The model a plan trains, from its ``training.model_spec`` and ``training.shape``: an ``hf:`` or
    factory spec as :func:`resolve_model` resolves it (an ``hf:`` model is checked against the
    recorded shape when built); any other spec is the reference transformer of the recorded shape
    (the spec's file need not exist any more), or of the spec's own shape when none is recorded."""
    if is_hf_spec(model_spec):
        return replace(_hf(model_spec), recorded_shape=recorded_shape or None)
    if is_factory_spec(model_spec):
        return _factory(model_spec)
    if recorded_shape:
        return ModelSource(model_spec, "recorded_shape",
                           known_shape=ModelShape.from_dict(recorded_shape, source="plan training.shape"))
    source = resolve_model(model_spec) if model_spec in BUILTIN_SHAPES or Path(model_spec).suffix == ".json" \
        and Path(model_spec).exists() else None
    if source is None or source.known_shape is None:
        raise InputError(f"cannot rebuild model {model_spec!r} from the plan: it records no transformer shape")
    return source


# --------------------------------------------------------------------------------------------
# one function per spec form
# --------------------------------------------------------------------------------------------

def _builtin(spec: str) -> ModelSource:
    return ModelSource(spec, "builtin", known_shape=BUILTIN_SHAPES[spec])


def _json_file(spec: str) -> ModelSource:
    """A ``.json`` spec: a model profile (``"kind": "model_profile"``) or a transformer shape."""
    d = read_json(spec, "model")
    if d.get("kind") == "model_profile":
        return ModelSource(spec, "profile_file", path=Path(spec), profile_json=d)
    return _shape_file(spec, d)


def _shape_file(spec: str, d: dict) -> ModelSource:
    path = Path(spec)
    return ModelSource(spec, "shape_file", path=path,
                       known_shape=ModelShape.from_dict({"name": path.stem, **d}, source=str(path)))


def _hf(spec: str) -> ModelSource:
    return ModelSource(spec, "hf")


def _factory(spec: str) -> ModelSource:
    return ModelSource(spec, "factory", path=Path(spec.rpartition(":")[0]))


def _check_recorded_shape(spec: str, actual: ModelShape, recorded: dict | None) -> None:
    if not recorded:
        return
    keys = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab")
    diff = [f"{k} {recorded[k]} != {getattr(actual, k)}" for k in keys if k in recorded
            and recorded[k] != getattr(actual, k)]
    if diff:
        raise InputError(f"the plan's shape does not match {spec!r}: {', '.join(diff)}")
