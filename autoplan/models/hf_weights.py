"""Hugging Face checkpoint directories in and out of the parallel layout (safetensors, sharded or not).

In: ``hf:DIR`` with ``load_weights=True`` (:func:`autoplan.models.hf.build_hf_model`) builds the unit model
on the meta device, holding no weights, and attaches a :class:`CheckpointWeights`. The executor
(:func:`autoplan.parallelize`) lays the meta model out (pipeline split, TP, FSDP) and then calls
:meth:`CheckpointWeights.materialize` on each of the rank's chunks: the chunk's storage is allocated on the
device (``to_empty``; FSDP2 and DTensor allocate only the rank's shard), and every parameter's local piece
is read from the safetensors files with ``safe_open(...).get_slice(name)[rows, cols]``, unit by unit (a
unit's files are opened, read and closed before the next unit's), so a rank holds its own shard plus at
most the pages and slices of one unit while loading, and never the whole model when the layout shards it.

Which HF tensor each unit-model parameter comes from (:func:`tensor_sources`)::

    GPT-2   embed.wte.weight / embed.wpe.weight     transformer.wte.weight / transformer.wpe.weight
            blocks.i.attn.{q,k,v}_proj.{weight,bias} transformer.h.i.attn.c_attn (Conv1D [h, 3h]: q, k, v
                                                     column ranges, transposed)
            blocks.i.attn.c_proj, blocks.i.mlp.c_fc, blocks.i.mlp.c_proj   the Conv1D of that name, transposed
            blocks.i.ln_1 / ln_2, head.ln_f           the LayerNorm of that name
            head.lm_head.weight                       lm_head.weight (transformer.wte.weight when tied)
    Llama   embed.weight                              model.embed_tokens.weight
            blocks.i.<rest>                           model.layers.i.<rest>
            head.norm.weight / head.lm_head.weight    model.norm.weight / lm_head.weight (embed_tokens when tied)

A name absent from the files is also looked up without its base prefix (``transformer.`` / ``model.``), as
checkpoints of the bare ``GPT2Model`` / ``LlamaModel`` store it. A checkpoint with tied input and output
embeddings is loaded untied (the head gets a copy: the two may sit on different pipeline stages) and
exported untied (``tie_word_embeddings: false``).

Out: :func:`hf_tensors` turns one unit's full parameters back into HF tensors (q/k/v fused into
``c_attn``, ``Conv1D`` weights transposed); :mod:`autoplan.execute.hf_export` writes a DCP checkpoint of
any layout as an HF directory with it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
from torch.distributed.tensor import DTensor

from autoplan.errors import InputError

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

BASE_PREFIX = {"gpt2": "transformer.", "llama": "model."}


@dataclass(frozen=True)
class TensorSource:
    """Where one unit-model parameter lives in the HF checkpoint.

    The parameter (``[out, in]`` for a linear, ``[n]`` for a vector) is HF tensor ``name``'s rows
    ``[offset, offset + out)``; for GPT-2's ``Conv1D`` (``transpose``) the HF tensor is ``[in, out_total]``
    and the parameter is columns ``[offset, offset + out)`` of it, transposed."""

    name: str
    transpose: bool = False
    offset: int = 0


def _gpt2_sources(config, layers: int) -> dict[str, TensorSource]:
    h = config.n_embd
    out = {"embed.wte.weight": TensorSource("transformer.wte.weight"),
           "embed.wpe.weight": TensorSource("transformer.wpe.weight"),
           "head.ln_f.weight": TensorSource("transformer.ln_f.weight"),
           "head.ln_f.bias": TensorSource("transformer.ln_f.bias"),
           "head.lm_head.weight": TensorSource("lm_head.weight")}
    for i in range(layers):
        hf, ours = f"transformer.h.{i}", f"blocks.{i}"
        for j, proj in enumerate(("q_proj", "k_proj", "v_proj")):
            out[f"{ours}.attn.{proj}.weight"] = TensorSource(f"{hf}.attn.c_attn.weight", True, j * h)
            out[f"{ours}.attn.{proj}.bias"] = TensorSource(f"{hf}.attn.c_attn.bias", False, j * h)
        for conv in ("attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
            out[f"{ours}.{conv}.weight"] = TensorSource(f"{hf}.{conv}.weight", True)
            out[f"{ours}.{conv}.bias"] = TensorSource(f"{hf}.{conv}.bias")
        for ln in ("ln_1", "ln_2"):
            for p in ("weight", "bias"):
                out[f"{ours}.{ln}.{p}"] = TensorSource(f"{hf}.{ln}.{p}")
    return out


def tensor_sources(family: str, config, param_names: list[str]) -> dict[str, TensorSource]:
    """Unit-model parameter name -> its :class:`TensorSource`, for every name of ``param_names`` (the
    whole unit model's, canonical)."""
    if family == "gpt2":
        table = _gpt2_sources(config, config.n_layer)
        missing = [n for n in param_names if n not in table]
        if missing:
            raise InputError(f"GPT-2 parameters without a checkpoint tensor: {missing[:3]}")
        return {n: table[n] for n in param_names}
    out = {}
    for n in param_names:
        if n == "embed.weight":
            out[n] = TensorSource("model.embed_tokens.weight")
        elif n == "head.norm.weight":
            out[n] = TensorSource("model.norm.weight")
        elif n == "head.lm_head.weight":
            out[n] = TensorSource("lm_head.weight")
        elif n.startswith("blocks."):
            out[n] = TensorSource("model.layers." + n[len("blocks."):])
        else:
            raise InputError(f"Llama parameter {n} has no checkpoint tensor")
    return out


# --------------------------------------------------------------------------------------------
# the files of a checkpoint directory
# --------------------------------------------------------------------------------------------

@dataclass
class SafetensorsIndex:
    """Which file of a checkpoint directory holds each tensor, and each tensor's shape."""

    root: Path
    weight_map: dict[str, str]
    """tensor name -> file name (relative to ``root``)"""
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def read(cls, root: str | os.PathLike) -> "SafetensorsIndex":
        """The index of ``root``: ``model.safetensors.index.json`` (sharded) or ``model.safetensors``.
        Refuses a missing or unreadable shard file."""
        from safetensors import SafetensorError, safe_open

        root = Path(root)
        index = root / INDEX_FILE
        if index.is_file():
            try:
                weight_map = {str(k): str(v) for k, v in json.loads(index.read_text())["weight_map"].items()}
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise InputError(f"{index}: malformed index ({type(e).__name__}: {e})") from None
        elif (root / SINGLE_FILE).is_file():
            weight_map = None
        else:
            raise InputError(f"{root}: no {SINGLE_FILE} nor {INDEX_FILE} (only safetensors checkpoints are read)")
        files = sorted(set(weight_map.values())) if weight_map is not None else [SINGLE_FILE]
        missing = [f for f in files if not (root / f).is_file()]
        if missing:
            raise InputError(f"{root}: missing checkpoint shard(s) {', '.join(missing)} named by {INDEX_FILE}")
        shapes, found = {}, {}
        for f in files:
            try:
                with safe_open(str(root / f), framework="pt") as h:
                    for k in h.keys():
                        shapes[k] = tuple(h.get_slice(k).get_shape())
                        found[k] = f
            except (SafetensorError, OSError) as e:
                raise InputError(f"{root / f}: not a readable safetensors file ({e})") from None
        if weight_map is not None:
            absent = [k for k, f in weight_map.items() if found.get(k) != f]
            if absent:
                raise InputError(f"{root}: tensor {absent[0]} is not in {weight_map[absent[0]]} as {INDEX_FILE} says")
        return cls(root=root, weight_map=found, shapes=shapes)

    def resolve(self, name: str, family: str) -> str | None:
        """``name`` as stored: itself, or without the base-model prefix; None when absent."""
        if name in self.weight_map:
            return name
        prefix = BASE_PREFIX[family]
        if name.startswith(prefix) and name[len(prefix):] in self.weight_map:
            return name[len(prefix):]
        return None


def _expected_hf_shape(src: TensorSource, shape: tuple[int, ...], hf_shape: tuple[int, ...]) -> bool:
    """Whether parameter ``shape`` fits inside HF tensor ``hf_shape`` as ``src`` says."""
    if len(shape) != len(hf_shape):
        return False
    if len(shape) == 1:
        return src.offset + shape[0] <= hf_shape[0]
    out_dim, in_dim = (1, 0) if src.transpose else (0, 1)
    return src.offset + shape[0] <= hf_shape[out_dim] and shape[1] == hf_shape[in_dim]


def _local_region(p: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(local shape, global offset)`` of this rank's piece of parameter ``p`` (a DTensor shard, or whole)."""
    if isinstance(p, DTensor):
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        shape, offset = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
        return tuple(shape), tuple(offset)
    return tuple(p.shape), (0,) * p.dim()


def _read_region(handle, name: str, src: TensorSource, shape: tuple[int, ...], offset: tuple[int, ...]
                 ) -> torch.Tensor:
    """The region ``[offset, offset + shape)`` of the parameter ``src`` describes, read from ``handle``."""
    sl = handle.get_slice(name)
    if len(shape) == 1:
        return sl[src.offset + offset[0]:src.offset + offset[0] + shape[0]]
    rows = slice(src.offset + offset[0], src.offset + offset[0] + shape[0])
    cols = slice(offset[1], offset[1] + shape[1])
    return sl[cols, rows].t() if src.transpose else sl[rows, cols]


def unit_of(param_name: str) -> str:
    """``blocks.3.attn.q_proj.weight`` -> ``block.3``; ``embed...`` -> ``embed``; ``head...`` -> ``head``."""
    first, _, rest = param_name.partition(".")
    return f"block.{rest.partition('.')[0]}" if first == "blocks" else first


@dataclass
class CheckpointWeights:
    """The weights of a Hugging Face checkpoint directory, for a unit model built on the meta device."""

    root: Path
    family: str
    """``gpt2`` or ``llama``"""
    index: SafetensorsIndex
    sources: dict[str, TensorSource]
    """unit-model parameter name -> where it is read from"""
    stored: dict[str, str]
    """unit-model parameter name -> the HF tensor name as stored in the files"""

    @classmethod
    def open(cls, root: Path, family: str, config, model: nn.Module) -> "CheckpointWeights":
        """Check, from the file headers only, that the checkpoint holds every parameter of ``model`` (built
        from ``config``, on any device) with the right shape."""
        index = SafetensorsIndex.read(root)
        shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
        sources = tensor_sources(family, config, list(shapes))
        stored = {}
        for n, src in sources.items():
            name = index.resolve(src.name, family)
            if name is None and n.endswith("lm_head.weight") and getattr(config, "tie_word_embeddings", False):
                embed = "transformer.wte.weight" if family == "gpt2" else "model.embed_tokens.weight"
                name = index.resolve(embed, family)     # tied: the head is the input embedding
            if name is None:
                raise InputError(f"{root}: the checkpoint has no tensor {src.name} (for {n}): missing shard or "
                                 f"not a {family} checkpoint")
            if not _expected_hf_shape(src, shapes[n], index.shapes[name]):
                raise InputError(f"{root}: tensor {name} has shape {list(index.shapes[name])}, which does not "
                                 f"hold {n} {list(shapes[n])} of the model its config.json describes")
            stored[n] = name
        return cls(root=root, family=family, index=index, sources=sources, stored=stored)

    def materialize(self, chunk: nn.Module, device: torch.device) -> None:
        """Allocate ``chunk`` (a laid-out piece of the meta model) on ``device`` and fill every parameter's
        local piece from the files, unit by unit; non-persistent buffers (rotary tables) are recomputed."""
        from safetensors import safe_open

        from autoplan.models.recompute import canonical_name

        chunk.to_empty(device=device)
        reset_buffers(chunk, device)
        by_unit: dict[str, list[tuple[str, torch.Tensor]]] = {}
        for raw, p in chunk.named_parameters():
            name = canonical_name(raw)
            if name not in self.stored:
                raise InputError(f"parameter {name} has no tensor in {self.root}")
            by_unit.setdefault(unit_of(name), []).append((name, p))
        with torch.no_grad():
            for params in by_unit.values():
                files = {self.index.weight_map[self.stored[n]] for n, _ in params}
                handles = {f: safe_open(str(self.root / f), framework="pt") for f in files}
                try:
                    for n, p in params:
                        shape, offset = _local_region(p)
                        local = p.to_local() if isinstance(p, DTensor) else p
                        if local.numel() == 0:
                            continue
                        stored = self.stored[n]
                        local.copy_(_read_region(handles[self.index.weight_map[stored]], stored, self.sources[n],
                                                 shape, offset).reshape(local.shape))
                finally:
                    handles.clear()     # closes the files (and their memory maps) before the next unit


def reset_buffers(module: nn.Module, device: torch.device) -> None:
    """Recompute the non-persistent buffers of ``module`` after ``to_empty``: the rotary tables of the
    Llama attention (the only buffers the adapters hold); any other buffer is a bug here."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    done = set()
    for m in module.modules():
        if isinstance(m, LlamaRotaryEmbedding):
            fresh = LlamaRotaryEmbedding(m.config)            # on the CPU, from the config alone
            for name, buf in fresh.named_buffers(recurse=False):
                getattr(m, name).copy_(buf.to(device))
                done.add(id(getattr(m, name)))
    other = [n for n, b in module.named_buffers() if id(b) not in done]
    if other:
        raise RuntimeError(f"buffers {other[:3]} of a meta-built model cannot be recomputed")


def units_in_order(names: list[str]) -> list[str]:
    """The units of parameter ``names`` in model order: ``embed``, ``block.0``, ``block.1``, ..., ``head``."""
    units = list(dict.fromkeys(unit_of(n) for n in names))
    return sorted(units, key=lambda u: (u != "embed", u == "head", int(u.split(".")[1]) if "." in u else 0))


def hf_tensors(family: str, config, unit_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One unit's full parameters (unit-model names) as HF tensors (fused and transposed back)."""
    sources = tensor_sources(family, config, list(unit_state))
    out: dict[str, list[tuple[int, torch.Tensor]]] = {}
    for n, t in unit_state.items():
        src = sources[n]
        out.setdefault(src.name, []).append((src.offset, t.t() if src.transpose and t.dim() == 2 else t))
    dim = {}
    for n, src in sources.items():
        dim[src.name] = 1 if src.transpose and unit_state[n].dim() == 2 else 0
    return {k: torch.cat([t for _, t in sorted(parts, key=lambda x: x[0])], dim=dim[k]).contiguous()
            for k, parts in out.items()}
