"""User models given as ``path/to/file.py:factory``.

The file is imported (as a fresh module, by path) and ``factory()`` is called with no arguments, under
``torch.manual_seed(seed)`` (the caller's RNG state is restored afterwards). It returns either

- an ``nn.Module`` that follows the unit-model protocol (:mod:`autoplan.models.units`: ``embed``,
  ``blocks`` as an ``nn.ModuleDict`` keyed ``"0".."N-1"``, ``head``, ``unit_names()``,
  ``keep_units(names)``, ``forward(x)``; optionally ``tp_plan``); or
- a plain ``nn.Sequential``: wrapped in :class:`SequentialUnits`, every element becomes a unit
  ``block.i`` (no ``embed``/``head``), and tensor parallel applies only if the ``nn.Sequential`` carries
  a ``tp_plan`` attribute.

Either way the model must say what it trains on: attributes ``vocab_size`` (tokens are
``0..vocab_size-1``; the output is logits ``[b, s, vocab_size]``) and ``seq_len`` (default sequence
length). For an ``nn.Sequential`` without ``vocab_size`` the first ``nn.Embedding``'s
``num_embeddings`` is used. The first unit receives tokens ``[b, s]`` (int64), later ones the
previous unit's output.

See ``examples/user_model.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import torch
import torch.nn as nn

from autoplan.errors import InputError
from autoplan.models.units import UnitModel

PROTOCOL = ("blocks", "unit_names", "keep_units")


def is_factory_spec(spec: str) -> bool:
    """``path/to/file.py:function`` (the file need not exist yet for this test)."""
    path, sep, func = spec.rpartition(":")
    return bool(sep) and path.endswith(".py") and func.isidentifier()


def parse_factory_spec(spec: str) -> tuple[Path, str]:
    """(file path, factory name); InputError when the form is wrong or the file is missing."""
    if not is_factory_spec(spec):
        raise InputError(f"not a model factory spec (path/to/file.py:function): {spec!r}")
    path, _, func = spec.rpartition(":")
    p = Path(path)
    if not p.is_file():
        raise InputError(f"model factory file not found: {path}")
    return p, func


class SequentialUnits(UnitModel):
    """An ``nn.Sequential`` as a unit model: element ``i`` is unit ``block.i``; no embed, no head."""

    def __init__(self, seq: nn.Sequential, *, vocab_size: int, seq_len: int):
        super().__init__(None, list(seq), None, vocab_size=vocab_size, seq_len=seq_len)
        self.tp_plan = getattr(seq, "tp_plan", None)


def _load_module(path: Path) -> object:
    """Import ``path`` as a module of its own, once per (resolved path, file content): an edited file
    is imported again."""
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode() + b"\0" + resolved.read_bytes()).hexdigest()[:16]
    name = "autoplan_user_model_" + digest
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot import model factory file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        del sys.modules[name]
        raise InputError(f"{path}: syntax error: {e}") from None
    return module


def _first_embedding(module: nn.Module) -> nn.Embedding | None:
    return next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)


def as_unit_model(model: nn.Module, source: str) -> nn.Module:
    """``model`` itself if it follows the protocol, an ``nn.Sequential`` wrapped; InputError otherwise.

    Also checks ``vocab_size`` and ``seq_len`` (see the module docstring)."""
    if isinstance(model, nn.Sequential):
        vocab = getattr(model, "vocab_size", None)
        if vocab is None:
            emb = _first_embedding(model)
            vocab = emb.num_embeddings if emb is not None else None
        seq_len = getattr(model, "seq_len", None)
        if vocab is None or seq_len is None:
            raise InputError(f"{source}: an nn.Sequential model needs attributes vocab_size and seq_len "
                             f"(vocab_size may come from an nn.Embedding in it)")
        if len(model) == 0:
            raise InputError(f"{source}: the nn.Sequential is empty")
        return SequentialUnits(model, vocab_size=int(vocab), seq_len=int(seq_len))
    if not isinstance(model, nn.Module):
        raise InputError(f"{source}: the factory returned a {type(model).__name__}, not an nn.Module")
    missing = [a for a in PROTOCOL if not hasattr(model, a)]
    if missing or not isinstance(getattr(model, "blocks", None), nn.ModuleDict):
        raise InputError(f"{source}: the model is neither an nn.Sequential nor a unit model "
                         f"(needs embed/head attributes, blocks as nn.ModuleDict, unit_names(), keep_units(); "
                         f"missing: {', '.join(missing) or 'blocks as nn.ModuleDict'})")
    for attr in ("vocab_size", "seq_len"):
        v = getattr(model, attr, None)
        if not isinstance(v, int) or v < 1:
            raise InputError(f"{source}: the model needs a positive integer attribute {attr}, got {v!r}")
    return model


def build_factory_model(spec: str, seed: int = 0) -> nn.Module:
    """Import the file of ``spec``, call its factory under ``torch.manual_seed(seed)``, return a unit model."""
    path, func = parse_factory_spec(spec)
    module = _load_module(path)
    factory = getattr(module, func, None)
    if not callable(factory):
        raise InputError(f"{path} has no function {func!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = factory()
    unit_model = as_unit_model(model, spec)
    unit_model.spec = spec
    return unit_model
