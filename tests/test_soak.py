"""Soak: 100 steps, a checkpoint every 20, three workers killed at random steps; the weights and
optimizer state at the end are bit-identical to those of an uninterrupted run of the same plan (which
saves only after its last step).

gpt-tiny on 4 gloo processes (dp2 x pp2, ZeRO-1, AdamW) under `autoplan run --max-restarts 3`: at
three random steps (seeded; AUTOPLAN_TEST_SEED=N for others) one random worker process is SIGKILLed;
torchrun stops the others and restarts the group, which resumes from the last checkpoint.

    python -m pytest tests/test_soak.py -q
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from dist_utils import even_stages
from test_checkpoint import write_plan

REPO = Path(__file__).resolve().parents[1]
STEPS, CKPT_EVERY, KILLS = 100, 20, 3
SEED = int(os.environ.get("AUTOPLAN_TEST_SEED", "5"))
STEP_RE = re.compile(r"^step (\d+) loss (\S+) time_s")


def workers_of(pid: int) -> list[int]:
    """The training-script processes below ``pid``."""
    from autoplan.processes import descendants
    out = []
    for p in descendants(pid):
        try:
            if b"train_gpt.py" in Path(f"/proc/{p}/cmdline").read_bytes():
                out.append(p)
        except OSError:
            pass
    return out


def train(plan: Path, ckpt: Path, kill_at: list[int], rng: random.Random) -> tuple[str, list[int]]:
    """Run the plan to STEPS; kill one random worker when attempt k first prints step kill_at[k].
    A run without kills saves only after its last step (the reference: nothing restored, nothing
    saved on the way). Returns (stdout, the pids killed)."""
    cmd = [sys.executable, "-m", "autoplan.cli", "run", str(plan), "--max-restarts", str(len(kill_at)), "--",
           "examples/train_gpt.py", "--steps", str(STEPS), "--optimizer", "adamw", "--ckpt-dir", str(ckpt),
           "--ckpt-every", str(CKPT_EVERY if kill_at else 0)]
    with open(ckpt.with_suffix(".err"), "w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        lines, killed = [], []
        try:
            for line in proc.stdout:
                lines.append(line)
                m = STEP_RE.match(line)
                if m and len(killed) < len(kill_at) and int(m.group(1)) >= kill_at[len(killed)]:
                    victims = workers_of(proc.pid)
                    assert victims, "no worker processes found"
                    victim = rng.choice(victims)
                    os.kill(victim, signal.SIGKILL)
                    killed.append(victim)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, ckpt.with_suffix(".err").read_text()[-3000:]
    return "".join(lines), killed


def final_state(ckpt: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    out = ckpt.parent / f"{ckpt.name}-final.pt"
    dcp_to_torch_save(ckpt / f"step_{STEPS:08d}", out)
    return torch.load(out, weights_only=False)


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_three_killed_workers_end_bit_identical(tmp_path):
    rng = random.Random(SEED)
    kill_at = sorted(rng.sample(range(5, STEPS - 5), KILLS))
    plan = write_plan(tmp_path / "plan.json", dp=2, pp=2, num_microbatches=2, zero=1, stages=even_stages(4, 2))

    # the uninterrupted run trains alongside (its own torchrun job; it kills nothing and draws nothing from rng):
    # on 2 cores the two jobs fill each other's single-process phases (agent start-ups, restarts)
    with ThreadPoolExecutor(1) as alongside:
        clean_run = alongside.submit(train, plan, tmp_path / "clean", [], rng)
        soaked, killed = train(plan, tmp_path / "soaked", kill_at, rng)
        clean, _ = clean_run.result()
    assert len(killed) == KILLS, soaked[-2000:]
    resumed = [int(s) for s in re.findall(r"^resumed from step (\d+)", soaked, re.M)]
    assert len(resumed) == KILLS and all(r % CKPT_EVERY == 0 and r <= k + 1 for r, k in zip(resumed, kill_at)), \
        (kill_at, resumed)

    a, b = flat(final_state(tmp_path / "clean")), flat(final_state(tmp_path / "soaked"))
    assert set(a) == set(b) and any(k.endswith("exp_avg_sq") for k in a), sorted(set(a) ^ set(b))
    for k in a:
        same = torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k]
        assert same, f"{k} differs after {KILLS} killed workers (kills at steps {kill_at})"
