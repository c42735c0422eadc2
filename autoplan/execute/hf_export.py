"""Weights out: a DCP checkpoint of an ``hf:`` model, written under any layout, as a Hugging Face directory.

    autoplan export-weights runs/ckpt --plan plan.json --to-hf tuned/
    AutoModelForCausalLM.from_pretrained("tuned/")

The checkpoint (:mod:`autoplan.execute.checkpoint`: the newest complete step under the directory, or one step
directory) is read in this one process, one unit at a time (``dcp.load`` of that unit's keys only, each
tensor whole), converted back to HF names and layouts (:func:`autoplan.models.hf_weights.hf_tensors`), and
written as one safetensors file per unit plus ``model.safetensors.index.json``, ``config.json`` (the source
checkpoint's config, or the preset's, with ``tie_word_embeddings: false`` and fp32) and the tokenizer files
of the source checkpoint directory when it has them. The directory is written as ``<OUT>.partial`` and
renamed when complete; an existing ``OUT`` is refused.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from autoplan.errors import InputError
from autoplan.jsonio import write_json_atomic
from autoplan.models.hf_weights import INDEX_FILE, units_in_order, hf_tensors, unit_of

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "tokenizer.model", "generation_config.json")
"""files copied from the source checkpoint directory into an export, when present"""

MODEL_PREFIX = "model."
"""the DCP keys of the model's state (:func:`autoplan.execute.checkpoint.save` stores ``{"model": ...}``)"""


def model_entries(ckpt_path: Path):
    """``(reader, {unit-model name: tensor metadata})`` of the model state of the DCP checkpoint ``ckpt_path``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    try:
        reader = dcp.FileSystemReader(str(ckpt_path))
        meta = reader.read_metadata()
    except (OSError, ValueError, RuntimeError) as e:
        raise InputError(f"{ckpt_path}: not a readable DCP checkpoint ({type(e).__name__}: {e})") from None
    entries = {k[len(MODEL_PREFIX):]: v for k, v in meta.state_dict_metadata.items()
               if k.startswith(MODEL_PREFIX) and isinstance(v, TensorStorageMetadata)}
    if not entries:
        raise InputError(f"{ckpt_path}: the checkpoint holds no model state")
    return reader, entries


def iter_dcp_units(reader, entries: dict) -> Iterator[tuple[str, dict[str, torch.Tensor]]]:
    """``(unit, {unit-model name: full tensor})`` for each unit of :func:`model_entries` in model order, one
    unit in memory at a time."""
    import torch.distributed.checkpoint as dcp

    for unit in units_in_order(list(entries)):
        names = [n for n in entries if unit_of(n) == unit]
        state = {MODEL_PREFIX + n: torch.empty(tuple(entries[n].size), dtype=entries[n].properties.dtype)
                 for n in names}
        with warnings.catch_warnings():      # "torch.distributed is disabled ...": one process, as meant
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(state, storage_reader=reader, no_dist=True)
        yield unit, {n: state[MODEL_PREFIX + n] for n in names}


def export_hf(ckpt_path: Path, out_dir: Path, *, family: str, config, source_dir: Path | None) -> list[str]:
    """Write the DCP checkpoint ``ckpt_path`` as an HF directory ``out_dir`` (see the module docstring);
    returns the names of the files written. The directory is written as ``<out_dir>.partial`` and renamed
    when complete."""
    from safetensors.torch import save_file

    if out_dir.exists():
        raise InputError(f"{out_dir} already exists: give a new directory")
    reader, entries = model_entries(ckpt_path)
    n_units = len(units_in_order(list(entries)))
    staging = out_dir.with_name(out_dir.name + ".partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        weight_map: dict[str, str] = {}
        total_bytes = 0
        for i, (_, state) in enumerate(iter_dcp_units(reader, entries)):
            fname = f"model-{i + 1:05d}-of-{n_units:05d}.safetensors"
            hf = hf_tensors(family, config, state)
            save_file(hf, str(staging / fname), metadata={"format": "pt"})
            weight_map.update({k: fname for k in hf})
            total_bytes += sum(t.numel() * t.element_size() for t in hf.values())
        write_json_atomic(staging / INDEX_FILE, {"metadata": {"total_size": total_bytes}, "weight_map": weight_map})
        config.tie_word_embeddings = False
        setattr(config, "dtype" if hasattr(config, "dtype") else "torch_dtype", torch.float32)
        config.save_pretrained(str(staging))
        for f in TOKENIZER_FILES if source_dir is not None else ():
            if (source_dir / f).is_file() and not (staging / f).exists():
                shutil.copy2(source_dir / f, staging / f)
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(p.name for p in out_dir.iterdir())


def dcp_step_dir(ckpt_dir: Path) -> Path:
    """The DCP directory to export: ``ckpt_dir`` itself when it is one (holds ``.metadata``), else the
    newest complete step named by its ``latest`` marker (:mod:`autoplan.execute.checkpoint`)."""
    if (ckpt_dir / ".metadata").is_file():
        return ckpt_dir
    from autoplan.execute.checkpoint import read_latest

    if not ckpt_dir.is_dir():
        raise InputError(f"checkpoint directory not found: {ckpt_dir}")
    latest = read_latest(ckpt_dir)
    if latest is None:
        raise InputError(f"{ckpt_dir} holds no checkpoint (no .metadata, no 'latest' marker)")
    return latest.path


def export_plan_weights(ckpt_dir: str | os.PathLike, plan_path: str | os.PathLike, out_dir: str | os.PathLike
                        ) -> tuple[Path, list[str]]:
    """``autoplan export-weights``: :func:`export_checkpoint` of the plan's model."""
    from autoplan.plan.plan import Plan

    return export_checkpoint(ckpt_dir, Plan.load(plan_path).training.model_spec, out_dir)


def export_checkpoint(ckpt_dir: str | os.PathLike, spec: str | None, out_dir: str | os.PathLike
                      ) -> tuple[Path, list[str]]:
    """The DCP checkpoint under ``ckpt_dir`` of the ``hf:`` model ``spec``, as an HF directory ``out_dir``.
    Checks the checkpoint's tensors against the model ``spec`` names (names and shapes, from a meta-device
    build) before writing anything. Returns the step directory read and the files written."""
    from autoplan.models.hf import build_hf_model, checkpoint_config, checkpoint_dir, hf_arch, hf_config, is_hf_spec

    if not spec or not is_hf_spec(spec):
        raise InputError(f"export-weights writes Hugging Face models; the plan's model is {spec!r}, not hf:...")
    if Path(out_dir).exists():
        raise InputError(f"{out_dir} already exists: give a new directory")
    step_dir = dcp_step_dir(Path(ckpt_dir))
    family = hf_arch(spec).family
    source = checkpoint_dir(spec)
    with torch.device("meta"):
        model = build_hf_model(spec)
    want = {n: tuple(p.shape) for n, p in model.named_parameters()}
    have = {n: tuple(v.size) for n, v in model_entries(step_dir)[1].items()}
    if have != want:
        diff = sorted(set(have) ^ set(want)) or [n for n in want if have[n] != want[n]]
        raise InputError(f"{step_dir} is not a checkpoint of {spec} (first difference: {diff[0]})")
    config = hf_config(spec) if source is None else checkpoint_config(source)
    files = export_hf(step_dir, Path(out_dir), family=family, config=config, source_dir=source)
    return step_dir, files


