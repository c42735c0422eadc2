"""Executor checks that need no equivalence run: validation before any collective, launch command,
synthetic data, and the training script's output and exit codes under torchrun.

    python -m pytest tests/test_execute.py -q
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autoplan.errors import LaunchError, LayoutError
from autoplan.execute.apply import check_launch, parallelize
from autoplan.execute.data import dp_slice, synthetic_batch
from autoplan.execute.launch import torchrun_command
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.models.transformer import build_model, unit_names
from autoplan.plan.plan import Layout, Plan, Prediction, SolverInfo, TrainingSpec

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "train_gpt.py"
TINY = BUILTIN_SHAPES["gpt-tiny"]
UNITS = unit_names(TINY)   # embed, block.0..3, head


def write_plan(path: Path, **layout) -> Path:
    lay = Layout(**{"stages": [UNITS], **layout})
    Plan(layout=lay, predicted=Prediction(step_time_s=0.0, peak_memory_bytes=0, breakdown_s={}),
         solver=SolverInfo(status="hand", objective=0.0, bound=0.0, wall_s=0.0),
         training=TrainingSpec(model_spec="gpt-tiny", shape=None, global_batch=lay.global_batch,
                               seq_len=TINY.seq_len, optimizer="sgd", world_size=lay.world_size)).save(path)
    return path


def run_script(cmd: list[str], timeout_s: float = 120) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO, env=env)


# -- validation: no process group needed, nothing starts -------------------------------------------

def check(layout: Layout, world_size: int) -> None:
    check_launch(layout, world_size=world_size, unit_names=UNITS, heads=TINY.heads, kv_heads=TINY.kv_heads,
                 ffn_hidden=TINY.ffn_hidden)


def test_check_launch_accepts_a_matching_layout():
    check(Layout(dp=2, pp=2, num_microbatches=2, stages=[UNITS[:3], UNITS[3:]]), 4)


@pytest.mark.parametrize("layout, world, error, words", [
    (Layout(dp=4, stages=[UNITS]), 2, LaunchError, "world size 2"),
    (Layout(pp=2, num_microbatches=2, stages=[UNITS[:2], UNITS[3:]]), 2, LaunchError, "block.1"),
    (Layout(tp=8, stages=[UNITS]), 8, LayoutError, "heads"),
    (Layout(pp=2, num_microbatches=1, stages=[UNITS[:3], UNITS[3:]]), 2, LayoutError, "1f1b"),
    (Layout(pp=2, num_microbatches=2), 2, LayoutError, "no stages"),
])
def test_check_launch_refuses(layout, world, error, words):
    with pytest.raises(error, match=words):
        check(layout, world)


def test_parallelize_needs_a_process_group():
    with pytest.raises(LaunchError, match="torchrun"):
        parallelize(build_model(TINY), Layout(stages=[UNITS]))


# -- data -------------------------------------------------------------------------------------------

def test_synthetic_batch_is_deterministic_and_shifted():
    tokens, labels = synthetic_batch(3, 8, 32, 256, seed=1)
    again, _ = synthetic_batch(3, 8, 32, 256, seed=1)
    assert tokens.shape == labels.shape == (8, 32) and tokens.dtype == torch.int64
    assert torch.equal(tokens, again)
    assert torch.equal(labels[:, :-1], tokens[:, 1:])
    assert not torch.equal(tokens, synthetic_batch(4, 8, 32, 256, seed=1)[0])
    assert int(tokens.max()) < 256 and int(tokens.min()) >= 0


def test_dp_slices_cover_the_batch():
    batch = torch.arange(8).view(8, 1)
    parts = [dp_slice(batch, dp_rank=r, dp_size=4) for r in range(4)]
    assert torch.equal(torch.cat(parts), batch)


# -- launch command ---------------------------------------------------------------------------------

def test_torchrun_command(tmp_path):
    plan = write_plan(tmp_path / "plan.json", dp=2, tp=2, mbs=2)
    cmd = torchrun_command(plan, "train.py", ["--steps", "3"])
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in cmd and "--nnodes=1" in cmd and "--standalone" in cmd
    assert cmd[-5:] == ["train.py", "--plan", str(plan), "--steps", "3"]
    # An explicit --plan is left alone; two nodes split the world and need a rendezvous endpoint.
    assert torchrun_command(plan, "t.py", ["--plan=x.json"])[-2:] == ["t.py", "--plan=x.json"]
    two = torchrun_command(plan, "t.py", [], nnodes=2, node_rank=1, rdzv_endpoint="10.0.0.1:29500")
    assert "--nproc-per-node=2" in two and "--node-rank=1" in two and "--rdzv-endpoint=10.0.0.1:29500" in two
    with pytest.raises(LaunchError, match="rendezvous"):
        torchrun_command(plan, "t.py", [], nnodes=2)
    with pytest.raises(LaunchError, match="3 nodes"):
        torchrun_command(plan, "t.py", [], nnodes=3)
    assert "--max-restarts=1" in torchrun_command(plan, "t.py", [], max_restarts=1)
    assert not any(a.startswith("--max-restarts") for a in cmd)


# -- the training script under torchrun -------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(120)
def test_wrong_nproc_gives_one_error_line_and_exit_2(tmp_path):
    plan = write_plan(tmp_path / "plan.json", dp=4)
    r = run_script([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                    str(TRAIN), "--plan", str(plan), "--steps", "2"])
    errors = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("error:")]
    assert errors == ["error: plan needs dp*tp*pp = 4*1*1 = 4 processes but the launch has world size 2"]
    assert r.returncode != 0 and "step " not in r.stdout
    # The worker exited 2 on its own (torchrun's failure summary), with no Python traceback.
    assert re.search(r"Root Cause.*?exitcode\s+: 2 ", r.stderr, re.S), r.stderr[-2000:]
    assert "train_gpt.py\", line" not in r.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launch_trains_and_reports(tmp_path):
    plan = write_plan(tmp_path / "plan.json", pp=2, num_microbatches=2, schedule="gpipe",
                      stages=[UNITS[:3], UNITS[3:]])
    code = ("import sys; from autoplan.execute.launch import launch; "
            f"sys.exit(launch({str(plan)!r}, {str(TRAIN)!r}, ['--steps', '3']))")
    r = run_script([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    steps = [ln for ln in lines if ln.startswith("step ")]
    assert len(steps) == 3
    assert all(re.fullmatch(r"step \d+ loss \d+\.\d+ time_s \d+\.\d+", ln) for ln in steps), steps
    assert re.fullmatch(r"peak_memory_bytes \d+", lines[-2]) and int(lines[-2].split()[1]) > 0
    assert re.fullmatch(r"median_step_time_s \d+\.\d+", lines[-1])
    # on CPU: the tensors' peak (what a plan predicts), below the process's resident set, printed apart
    assert re.fullmatch(r"peak_rss_bytes \d+", lines[-3])
    assert 0 < int(lines[-2].split()[1]) < int(lines[-3].split()[1]) / 4


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launch_returns_the_workers_exit_code(tmp_path):
    plan = write_plan(tmp_path / "plan.json", dp=2, stages=[UNITS[:1] + ["block.9"] + UNITS[2:]])
    code = ("import sys; from autoplan.execute.launch import launch; "
            f"sys.exit(launch({str(plan)!r}, {str(TRAIN)!r}, ['--steps', '1']))")
    r = run_script([sys.executable, "-c", code])
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "'block.9'" in errors[0]


# -- gradient accumulation under fully_shard: how often the parameters are gathered --------------

def _gathers_per_step(rank: int, world_size: int, layouts: list[dict]) -> list[int]:
    """FSDP2 all-gathers (one per unit gathered) in the second training step of each layout."""
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as param_group

    counted = [0]
    gather = param_group.foreach_all_gather

    def counting(*args, **kwargs):
        counted[0] += 1
        return gather(*args, **kwargs)

    param_group.foreach_all_gather = counting
    out = []
    try:
        for d in layouts:
            layout = Layout(**d)
            par = parallelize(build_model(TINY, seed=0), layout)
            opt = torch.optim.SGD(par.parameters(), lr=0.1)
            for step in range(2):
                counted[0] = 0
                tokens, labels = synthetic_batch(step, layout.global_batch, TINY.seq_len, TINY.vocab, 0)
                par.step(par.batch_slice(tokens), par.batch_slice(labels))
                opt.step()
                opt.zero_grad()
            out.append(counted[0])
    finally:
        param_group.foreach_all_gather = gather
    return out


GATHER_LAYOUTS = [dict(dp=2, zero=z, mbs=1, num_microbatches=m) for z in (2, 3) for m in (1, 4)]
SHARED_JOBS = {"gathers": (2, _gathers_per_step, (GATHER_LAYOUTS,), 100)}   # the session's 2-process job (conftest)


@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_zero2_keeps_the_gathered_parameters_across_a_steps_microbatches(shared_jobs):
    """ZeRO-1/2 gather each unit's parameters once a step whatever the micro-batch count (as the cost model
    prices them); ZeRO-3 gathers them again for every micro-batch."""
    z2_one, z2_four, z3_one, z3_four = shared_jobs.get(__name__, "gathers")[0]
    assert z2_one > 0 and z2_four == z2_one
    assert z3_four == 4 * z3_one
