"""Save and restore a parallelized model and its optimizer with ``torch.distributed.checkpoint`` (DCP).

    start = load(par, opt, "runs/ckpt") or 0      # steps already done; 0 when there is no checkpoint
    for step in range(start, steps):
        ...
        if (step + 1) % every == 0 or step + 1 == steps:
            save(par, opt, step + 1, "runs/ckpt")     # collective: every rank calls it

State dicts come from ``torch.distributed.checkpoint.state_dict.get_state_dict``, so every key is the
unsplit model's name (``blocks.3.mlp.w1.weight``, ``state.blocks.3.mlp.w1.weight.exp_avg``) whatever
the wrappers (DDP, ``fully_shard``, checkpoint wrappers) and every value is this rank's piece (a DTensor
shard under TP/FSDP, a plain tensor under DDP, only the stage's units under PP). DCP stores pieces
with their global offsets, so a checkpoint written under one layout loads under any other: each rank
reads the bytes of its own shard of its own stage. The optimizer state is flattened
(``flatten_optimizer_state_dict``) so that pipeline stages, which hold different parameters, agree on
its structure.

Beside the sharded state, each rank keeps what is its own and not a tensor of the model: its random
number generators (torch's CPU generator, its CUDA device's where present, Python's ``random``) and,
under fp16, the loss scaler's state (scale and growth tracker). They go to one small ``torch.save``
file per rank. On load, a rank takes its own file back when the checkpoint was written by the same
world size (the same rank then plays the same part); under another world size the RNG streams of the
old ranks have no counterpart and are left as they are, and the loss scale is taken from rank 0's
file (every rank's scale is the same: :class:`~autoplan.execute.scaler.LossScaler` syncs them).

Beside them, a save may carry ``extra_state``: a JSON-able dict that is the same on every rank (a data
loader's position, :meth:`autoplan.execute.token_data.TokenBatches.state`), written by rank 0 as
``extra_state.json`` and read back with :func:`read_extra_state`.

On disk::

    DIR/step_00000004/   one DCP checkpoint (``.metadata`` + one file per rank), the state after 4 steps
                         and ``rank_state_<r>.pt`` per rank (RNG states, loss scaler)
    DIR/latest           {"step": 4, "dir": "step_00000004"}: written by rank 0 only after every rank
                         finished writing the step directory, by an atomic rename

A save writes into ``DIR/step_00000004.partial/`` and rank 0 renames it to ``step_00000004`` once
every rank has finished, so a ``step_*`` directory is always complete; a crash or a signal during a
save leaves ``latest`` at the previous complete checkpoint and at most one ``*.partial`` directory,
which the next save removes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from autoplan.errors import InputError
from autoplan.execute.apply import Parallelized
from autoplan.jsonio import write_json_atomic

LATEST = "latest"
"""name of the marker file, inside the checkpoint directory, that names the newest complete step"""

_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)

EXTRA_STATE = "extra_state.json"
"""rank 0's file beside the DCP shards: the caller's ``extra_state`` (the data position)"""

RANK_STATE = "rank_state_{rank}.pt"
"""per-rank file beside the DCP shards: RNG states and the loss scaler's state"""


@dataclass(frozen=True)
class Latest:
    """The contents of the ``latest`` marker."""

    step: int
    """training steps completed when the checkpoint was written (the next step to run)"""
    path: Path
    """the DCP directory of that step"""


def step_dir_name(step: int) -> str:
    """``step_00000004`` for the state after 4 steps."""
    return f"step_{step:08d}"


PARTIAL = ".partial"
"""suffix of a step directory that is still being written (renamed away when the save completes)"""


def read_latest(ckpt_dir: str | os.PathLike) -> Latest | None:
    """The newest complete checkpoint under ``ckpt_dir``, or ``None`` when there is none yet.

    Raises :class:`InputError` when the marker exists but is malformed or names a missing directory.
    """
    root = Path(ckpt_dir)
    marker = root / LATEST
    if not marker.is_file():
        return None
    try:
        d = json.loads(marker.read_text())
        step, name = int(d["step"]), str(d["dir"])
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{marker}: malformed checkpoint marker ({type(e).__name__}: {e})") from None
    path = root / name
    if not (path / ".metadata").is_file():
        raise InputError(f"{marker} names {path}, which holds no complete DCP checkpoint")
    return Latest(step=step, path=path)


def merged_module(modules: list[nn.Module]) -> nn.Module:
    """One module whose parameter names are the unsplit model's, over this rank's chunks.

    With one chunk that chunk is returned. With several (interleaved pipeline: chunks ``r, r + pp,
    ...``) a container takes each chunk's children under their own names, merging child
    ``ModuleDict`` s (``blocks``) key by key; the modules themselves are shared, not copied, so the
    FSDP state-dict hooks on them still run.
    """
    if len(modules) == 1:
        return modules[0]
    view = nn.Module()
    for chunk in modules:
        _merge_children(view, chunk)
    return view


def _merge_children(dst: nn.Module, src: nn.Module) -> None:
    for name, child in src.named_children():
        have = dst._modules.get(name)
        if have is None:
            dst.add_module(name, nn.ModuleDict(dict(child.items())) if isinstance(child, nn.ModuleDict) else child)
        elif isinstance(have, nn.ModuleDict) and isinstance(child, nn.ModuleDict):
            overlap = set(have.keys()) & set(child.keys())
            if overlap:
                raise ValueError(f"chunks share {name}.{sorted(overlap)[0]}: cannot merge their state")
            have.update(dict(child.items()))
        else:
            raise ValueError(f"two chunks both hold {name!r}: cannot merge their state")


def _state(par: Parallelized, optimizer: torch.optim.Optimizer) -> tuple[nn.Module, dict]:
    module = merged_module(par.modules)
    model_sd, optim_sd = get_state_dict(module, optimizer, options=_OPTIONS)
    return module, {"model": model_sd, "optim": optim_sd}


def rng_state(device: torch.device) -> dict:
    """This process's random number generator states: torch's CPU generator, ``device``'s CUDA
    generator (on CUDA), Python's ``random``."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _save_rank_state(par: Parallelized, path: Path) -> None:
    state = {"world_size": dist.get_world_size(), "rng": rng_state(par.device)}
    if par.grad_scaler is not None:
        state["grad_scaler"] = par.grad_scaler.state_dict()
    target = path / RANK_STATE.format(rank=dist.get_rank())
    tmp = target.with_name(f".{target.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, target)


def _read_rank_state(path: Path, rank: int) -> dict | None:
    f = path / RANK_STATE.format(rank=rank)
    if not f.is_file():
        return None
    return torch.load(f, map_location="cpu", weights_only=True)


def _load_rank_state(par: Parallelized, path: Path) -> None:
    """RNG states from this rank's file when the world size is the one saved; the loss scale from
    this rank's file, else rank 0's. Checkpoints written before these files existed load as before."""
    mine = _read_rank_state(path, dist.get_rank())
    if mine is not None and mine.get("world_size") == dist.get_world_size():
        set_rng_state(mine["rng"], par.device)
    if par.grad_scaler is not None:
        src = mine if mine is not None and "grad_scaler" in mine else _read_rank_state(path, 0)
        if src is not None and "grad_scaler" in src:
            par.grad_scaler.load_state_dict(src["grad_scaler"])


def save(par: Parallelized, optimizer: torch.optim.Optimizer, step: int, ckpt_dir: str | os.PathLike,
         extra_state: dict | None = None) -> Path:
    """Write the model and optimizer state after ``step`` completed steps; a collective.

    ``extra_state`` (the same on every rank, JSON-able) goes to ``extra_state.json`` (rank 0 writes it).

    Every rank writes its own pieces into ``ckpt_dir/step_<step>.partial``; after a barrier rank 0
    renames it to ``ckpt_dir/step_<step>`` and points ``ckpt_dir/latest`` at it (atomic renames).
    Returns the step directory.
    """
    root = Path(ckpt_dir)
    path = root / step_dir_name(step)
    staging = root / (path.name + PARTIAL)
    if dist.get_rank() == 0:
        root.mkdir(parents=True, exist_ok=True)
        for stale in [*root.glob("step_*" + PARTIAL), path]:  # left by a save that was interrupted
            if stale.exists():
                shutil.rmtree(stale)
    dist.barrier()
    _, state = _state(par, optimizer)
    dcp.save(state, checkpoint_id=staging)
    _save_rank_state(par, staging)
    if extra_state is not None and dist.get_rank() == 0:
        write_json_atomic(staging / EXTRA_STATE, extra_state)
    dist.barrier()  # every rank's files are complete before the directory is renamed and the marker moves
    if dist.get_rank() == 0:
        os.replace(staging, path)
        write_json_atomic(root / LATEST, {"step": step, "dir": path.name})     # temporary file, then rename
    dist.barrier()  # nobody reads the marker before it is written
    return path


def read_extra_state(ckpt_dir: str | os.PathLike) -> dict | None:
    """The ``extra_state`` saved with the newest complete checkpoint under ``ckpt_dir``; ``None`` when
    there is no checkpoint or it was saved without one."""
    latest = read_latest(ckpt_dir)
    if latest is None or not (latest.path / EXTRA_STATE).is_file():
        return None
    try:
        return json.loads((latest.path / EXTRA_STATE).read_text())
    except ValueError as e:
        raise InputError(f"{latest.path / EXTRA_STATE}: malformed ({e})") from None


def load(par: Parallelized, optimizer: torch.optim.Optimizer, ckpt_dir: str | os.PathLike) -> int | None:
    """Restore the newest complete checkpoint under ``ckpt_dir`` into ``par`` and ``optimizer``.

    A collective. Returns the number of steps it holds (the next step to run), or ``None`` (nothing
    changed) when the directory has no checkpoint yet. The checkpoint may come from any layout of
    the same model: each rank reads its own shards of its own stage.
    """
    latest = read_latest(ckpt_dir)
    if latest is None:
        return None
    module, state = _state(par, optimizer)
    dcp.load(state, checkpoint_id=latest.path)
    set_state_dict(module, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=_OPTIONS)
    _load_rank_state(par, latest.path)
    return latest.step
