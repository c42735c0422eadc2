"""Checkpoints (torch.distributed.checkpoint) survive a crash and load under another layout.

- cross-plan: 2 AdamW steps under one layout, save, load into a fresh model (another seed) laid out
  differently, 2 more steps: the 4 losses equal one process's uninterrupted 4 steps, and the weights
  and optimizer state after the load are bit-identical to those saved (gathered to full tensors).
- kill-and-resume: ``examples/train_gpt.py`` under torchrun with ``--max-restarts 1``; rank 1 dies at
  step 5 of the first attempt, torchrun restarts every worker, which resume from the step-4
  checkpoint: the losses and the final checkpoint equal those of an uninterrupted run.

Four gloo CPU processes (cross-plan: in the session's shared 4-process job, tests/conftest.py), gpt-tiny,
fp32.

    python -m pytest tests/test_checkpoint.py -q
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from dist_utils import even_stages

from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.models.transformer import build_model
from autoplan.plan.plan import Layout, Plan, Prediction, SolverInfo, TrainingSpec

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "train_gpt.py"
TINY = BUILTIN_SHAPES["gpt-tiny"]
SHAPE = TINY.to_dict()   # 4 blocks, h=64, 4 heads, vocab 256, s=32
SEED, ADAM_LR = 0, 1e-2
STEPS_BEFORE, STEPS_AFTER = 2, 2

PAIRS = {
    "dp4-zero3->tp2xpp2": (dict(dp=4, num_microbatches=2, zero=3),
                           dict(tp=2, pp=2, mbs=2, num_microbatches=4, schedule="gpipe", stages=even_stages(4, 2))),
    # context parallel: FSDP over the flattened dp x cp ranks, loaded into plain TP
    "dp2xcp2-zero3->dp2xtp2": (dict(dp=2, cp=2, mbs=2, num_microbatches=1, zero=3),
                               dict(dp=2, tp=2, mbs=2, num_microbatches=1)),
    "pp2xdp2-interleaved->dp2xtp2-zero3": (
        dict(dp=2, pp=2, vp=2, mbs=2, num_microbatches=2, schedule="interleaved", stages=even_stages(4, 4)),
        dict(dp=2, tp=2, mbs=4, num_microbatches=1, zero=3)),
}


def full_state(par, opt) -> dict[str, object]:
    """This rank's model and optimizer state as full tensors, flattened keys (a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    from autoplan.execute.checkpoint import merged_module

    model_sd, optim_sd = get_state_dict(merged_module(par.modules), opt, options=StateDictOptions(
        full_state_dict=True, flatten_optimizer_state_dict=True))
    out = {}
    for prefix, sd in (("model.", model_sd), ("optim.", optim_sd)):
        for k, v in sd.items():
            out[prefix + k] = v.detach().clone().cpu() if isinstance(v, torch.Tensor) else v
    return out


def cross_plan_worker(rank: int, world_size: int, pairs: list[tuple[dict, dict]], root: str) -> list[tuple]:
    """Per pair: ``(losses under A, full state saved, step loaded, full state loaded, losses under B)``."""
    from autoplan.execute.apply import parallelize
    from autoplan.execute.checkpoint import load, save
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import ModelShape, build_model

    s = ModelShape.from_dict(SHAPE)
    out = []
    for i, (a, b) in enumerate(pairs):
        ckpt = Path(root) / f"pair{i}"
        results = []
        for which, d in (("a", a), ("b", b)):
            layout = Layout.from_dict(d)
            par = parallelize(build_model(s, seed=SEED if which == "a" else SEED + 1), layout)
            opt = torch.optim.AdamW(par.parameters(), lr=ADAM_LR)
            if which == "b":
                start = load(par, opt, ckpt)
                results += [start, full_state(par, opt)]
            else:
                start = 0
            losses = []
            for step in range(start, start + (STEPS_BEFORE if which == "a" else STEPS_AFTER)):
                tokens, labels = synthetic_batch(step, layout.global_batch, s.seq_len, s.vocab, SEED)
                losses.append(par.step(par.batch_slice(tokens), par.batch_slice(labels)))
                opt.step()
                opt.zero_grad()
            if which == "a":
                save(par, opt, STEPS_BEFORE, ckpt)
                results += [losses, full_state(par, opt)]
            else:
                results.append(losses)
        out.append(tuple(results))
    return out


def adamw_reference(global_batch: int, steps: int) -> list[float]:
    """One process, full batch, AdamW: the loss of each step."""
    from autoplan.execute.apply import token_cross_entropy
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import build_model

    model = build_model(TINY, seed=SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=ADAM_LR)
    losses = []
    for step in range(steps):
        tokens, labels = synthetic_batch(step, global_batch, TINY.seq_len, TINY.vocab, SEED)
        loss = token_cross_entropy(model(tokens), labels)
        loss.backward()
        losses.append(loss.item())
        opt.step()
        opt.zero_grad()
    return losses


SHARED_JOBS = {"cross_plan": (4, cross_plan_worker, lambda root: (list(PAIRS.values()), str(root)), 150)}   # conftest


@pytest.fixture(scope="module")
def cross_plan(shared_jobs):
    return shared_jobs.get(__name__, "cross_plan")


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("index, name", list(enumerate(PAIRS)))
def test_cross_plan_load_continues_the_run(cross_plan, index, name):
    a, b = (Layout.from_dict(d) for d in PAIRS[name])
    assert a.global_batch == b.global_batch
    ref = adamw_reference(a.global_batch, STEPS_BEFORE + STEPS_AFTER)
    loaded_keys: set[str] = set()
    saved_keys: set[str] = set()
    for rank, per_pair in enumerate(cross_plan):
        losses_a, saved, start, loaded, losses_b = per_pair[index]
        assert start == STEPS_BEFORE
        for step, (got, want) in enumerate(zip(losses_a + losses_b, ref, strict=True)):
            assert abs(got - want) <= 1e-5 * abs(want), f"rank {rank} step {step}: loss {got} != {want}"
        saved_keys |= set(saved)
        loaded_keys |= set(loaded)
        # Every rank of A holding a key saved the same full tensor; B's load must reproduce it exactly.
        for k, v in loaded.items():
            src = next(r[index][1][k] for r in cross_plan if k in r[index][1])
            same = torch.equal(v, src) if isinstance(v, torch.Tensor) else v == src
            assert same, f"rank {rank}: {k} after load is {v}, saved {src}"
    assert any(k.endswith(".exp_avg_sq") for k in loaded_keys), "no AdamW state was loaded"
    assert loaded_keys == saved_keys, sorted(loaded_keys ^ saved_keys)


# -- kill and resume under torchrun ----------------------------------------------------------------

def write_plan(path: Path, **layout) -> Path:
    lay = Layout(**layout)
    Plan(layout=lay, predicted=Prediction(step_time_s=0.0, peak_memory_bytes=0, breakdown_s={}),
         solver=SolverInfo(status="hand", objective=0.0, bound=0.0, wall_s=0.0),
         training=TrainingSpec(model_spec="gpt-tiny", shape=None, global_batch=lay.global_batch,
                               seq_len=TINY.seq_len, optimizer="sgd", world_size=lay.world_size)).save(path)
    return path


def torchrun(plan: Path, ckpt: Path, *extra: str, steps: int = 8) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
           "--max-restarts=1", str(TRAIN), "--plan", str(plan), "--steps", str(steps), "--optimizer", "sgd",
           "--ckpt-dir", str(ckpt), "--ckpt-every", "2", *extra]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=REPO, env=env)


def step_losses(stdout: str) -> list[tuple[int, float]]:
    return [(int(m[1]), float(m[2])) for m in re.finditer(r"^step (\d+) loss (\S+) time_s", stdout, re.M)]


def final_weights(ckpt: Path, step: int) -> dict[str, torch.Tensor]:
    """The model tensors of a DCP checkpoint, read in this one process."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = ckpt / "flat.pt"
    dcp_to_torch_save(ckpt / f"step_{step:08d}", out)
    return torch.load(out, weights_only=False)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kill_and_resume_equals_an_uninterrupted_run(tmp_path):
    plan = write_plan(tmp_path / "plan.json", dp=2, pp=2, num_microbatches=2, zero=1,
                      stages=even_stages(4, 2))
    with ThreadPoolExecutor(1) as alongside:     # two independent torchrun jobs at once: 2 cores fill each other's gaps
        clean_run = alongside.submit(torchrun, plan, tmp_path / "clean")
        crashed = torchrun(plan, tmp_path / "crashed", "--fail-at-step", "5")
        clean = clean_run.result()
    assert clean.returncode == 0, clean.stderr[-3000:]
    assert crashed.returncode == 0, crashed.stderr[-3000:]

    want = dict(step_losses(clean.stdout))
    assert sorted(want) == list(range(8))
    got = step_losses(crashed.stdout)
    # First attempt: steps 0..4 (dies at 5); second: resumes from the step-4 checkpoint, runs 4..7.
    assert [s for s, _ in got] == [0, 1, 2, 3, 4, 4, 5, 6, 7], crashed.stdout
    assert "resumed from step 4" in crashed.stdout
    assert "injected failure at step 5" in crashed.stderr
    for step, loss in got:
        assert abs(loss - want[step]) <= 1e-6 * abs(want[step]), f"step {step}: {loss} != {want[step]}"

    a, b = final_weights(tmp_path / "clean", 8), final_weights(tmp_path / "crashed", 8)
    assert set(a["model"]) == set(b["model"]) and len(a["model"]) == len(list(build_model(TINY).parameters()))
    for k in a["model"]:
        torch.testing.assert_close(b["model"][k], a["model"][k], rtol=1e-6, atol=0)


# -- the marker: no process group needed -------------------------------------------------------------

def test_latest_marker_names_only_complete_checkpoints(tmp_path):
    from autoplan.errors import InputError
    from autoplan.execute.checkpoint import LATEST, read_latest

    assert read_latest(tmp_path) is None                      # nothing saved yet: start from step 0
    (tmp_path / "step_00000002").mkdir()
    (tmp_path / "step_00000002" / ".metadata").write_bytes(b"x")
    (tmp_path / "step_00000004").mkdir()                      # a save that died before its .metadata
    (tmp_path / LATEST).write_text('{"step": 2, "dir": "step_00000002"}\n')
    latest = read_latest(tmp_path)
    assert latest is not None and latest.step == 2 and latest.path == tmp_path / "step_00000002"
    (tmp_path / LATEST).write_text('{"step": 4, "dir": "step_00000004"}\n')
    with pytest.raises(InputError, match="no complete DCP checkpoint"):
        read_latest(tmp_path)
    (tmp_path / LATEST).write_text("{not json")
    with pytest.raises(InputError, match="malformed"):
        read_latest(tmp_path)
