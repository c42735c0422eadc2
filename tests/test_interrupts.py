"""Nothing half-written, nothing left running: each command interrupted at a random point.

`autoplan profile model`, `profile cluster`, `solve`, `validate --calibrate` and `run` are started
as real processes, each over an output file that already exists, and sent SIGINT (to the process
group, as a terminal's Ctrl-C does) or SIGTERM (to the process, as `kill` does) after a random delay.
Then:

- the command ends within a bounded time with 130 (SIGINT) or 143 (SIGTERM) and its last stderr
  line is ``error: interrupted``, no traceback anywhere; or it had already finished (exit 0);
- the output file is byte-identical to the old one (or, if the command finished, a complete new one);
  for `run`, the checkpoint marker names a complete checkpoint;
- no temporary file (``.NAME.*.tmp``) is left beside it;
- no process the command started survives: every process carries a marker in its environment,
  and ``/proc`` is scanned for it (torchrun's workers, spawned profilers, CBC).

The delays come from a seeded generator; AUTOPLAN_TEST_SEED=N picks other points.

    python -m pytest tests/test_interrupts.py -q
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cli_utils import run_cli

REPO = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("AUTOPLAN_TEST_SEED", "11"))
MARK = "AUTOPLAN_INTERRUPT_TEST"


def marked_processes(token: str) -> list[int]:
    """Processes whose environment carries ``MARK=token`` (children inherit it)."""
    needle = f"{MARK}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*") if p.name.endswith(".tmp")]


def interrupt(argv: list[str], *, delay_s: float, sig: int, timeout_s: float = 90,
              finished: tuple[int, ...] = (0,)) -> tuple[int, str, str]:
    """Start ``autoplan argv``, send ``sig`` after ``delay_s`` (SIGINT to its process group, SIGTERM to
    it), wait for it; assert that nothing it started survives and that it ended with 128 + sig and
    one ``error: interrupted`` line, or with one of the ``finished`` codes (it was done before the
    signal; 2 with one ``error:`` line). Returns (code, stdout, stderr)."""
    token = uuid.uuid4().hex
    env = {**os.environ, MARK: token, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "autoplan.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env, start_new_session=True)
    try:
        try:
            proc.wait(timeout=delay_s)
        except subprocess.TimeoutExpired:
            (os.killpg if sig == signal.SIGINT else os.kill)(proc.pid, sig)
        out, err = proc.communicate(timeout=timeout_s)
        deadline = time.monotonic() + 20
        while marked_processes(token) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = marked_processes(token)
        assert not left, f"processes left running: {[Path(f'/proc/{p}/cmdline').read_bytes()[:200] for p in left]}"
    finally:
        for p in marked_processes(token) + ([proc.pid] if proc.poll() is None else []):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert "Traceback" not in out + err, err[-4000:]
    assert proc.returncode in (*finished, 128 + sig, -sig), (proc.returncode, out[-2000:], err[-4000:])
    lines = [l for l in err.splitlines() if l.strip()]
    if proc.returncode == -sig:
        # The signal came after the command had finished, while the interpreter exited (the
        # handlers are gone by then): killed by it, as any program is in that instant. Its work is
        # complete: it said so, and check_artifact finds the new file whole.
        assert out.strip() and not lines, (out[-1000:], err[-2000:])
        return 0, out, err
    if proc.returncode == 128 + sig:
        assert lines and lines[-1] == "error: interrupted", err[-3000:]
    elif proc.returncode == 2:
        assert lines and lines[-1].startswith("error: ") and "interrupted" not in lines[-1], err[-3000:]
    return proc.returncode, out, err


def delays(lo: float, hi: float, salt: str) -> list[float]:
    """Two random delays: one early in [1, lo] s (well inside the run: the interrupt must land, and
    after the interpreter has started autoplan), one in [lo, hi] s (late; it may find the command done)."""
    rng = random.Random(f"{SEED}-{salt}")
    return [rng.uniform(1.0, lo), rng.uniform(lo, hi)]


def check_artifact(path: Path, old: bytes, code: int, load) -> None:
    if code == 0:
        load(path)                  # finished before the signal: a complete new file
    else:
        assert path.read_bytes() == old, "the old file was changed"
    assert not temp_files(path.parent), temp_files(path.parent)


SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]


@pytest.fixture(scope="module")
def work(tmp_path_factory, gpt_tiny_profile):
    """A measured gpt-tiny model profile (the session's: tests/conftest.py), a 2-process cluster profile (the
    shipped one) and a dp=2 plan solved from them by the CLI, in this process (what every ``test_run`` case
    trains)."""
    from autoplan.plan.plan import Plan
    root = tmp_path_factory.mktemp("interrupts")
    (root / "model.json").write_bytes(gpt_tiny_profile.read_bytes())
    (root / "cluster.json").write_bytes((REPO / "profiles" / "cpu-2proc.json").read_bytes())
    solve = run_cli("solve", "--model", str(root / "model.json"), "--cluster", str(root / "cluster.json"),
                    "--global-batch", "4", "--layout", "dp=2", "--optimizer", "sgd", "--out", str(root / "plan.json"))
    assert solve.returncode == 0, solve.stderr
    Plan.load(root / "plan.json")
    return root


def old_file(path: Path, content: bytes) -> bytes:
    path.write_bytes(content)
    return content


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", SIGNALS)
def test_profile_model(work, tmp_path, sig):
    from autoplan.profile.formats import ModelProfile
    out = tmp_path / "model.json"
    old = old_file(out, (work / "model.json").read_bytes())
    for i, d in enumerate(delays(2.0, 6.0, f"profile-model-{sig}")):
        code, _, _ = interrupt(["profile", "model", "--model", "gpt-tiny", "--mbs", "1,2", "--repeats", "3",
                                "--out", str(out)], delay_s=d, sig=sig)
        check_artifact(out, old, code, ModelProfile.load)
        assert i or code == 128 + sig, "the early interrupt found the command already done"
        old = old_file(out, old)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", SIGNALS)
def test_profile_cluster(work, tmp_path, sig):
    from autoplan.profile.formats import ClusterProfile
    out = tmp_path / "cluster.json"
    old = old_file(out, (work / "cluster.json").read_bytes())
    for i, d in enumerate(delays(2.0, 5.0, f"profile-cluster-{sig}")):
        code, _, _ = interrupt(["profile", "cluster", "--nproc", "2", "--max-size", "64KiB", "--repeats", "2",
                                "--memory-per-device", "256MiB", "--out", str(out)], delay_s=d, sig=sig)
        check_artifact(out, old, code, ClusterProfile.load)
        assert i or code == 128 + sig, "the early interrupt found the command already done"
        old = old_file(out, old)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", SIGNALS)
def test_solve(tmp_path, sig):
    """A 175B model on 512 GPUs: seconds of search, CBC running as a child process."""
    from autoplan.plan.plan import Plan
    out = tmp_path / "plan.json"
    old = b'{"an": "old plan"}\n'
    for i, d in enumerate(delays(1.5, 4.0, f"solve-{sig}")):
        old_file(out, old)
        code, _, _ = interrupt(["solve", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb:64", "--global-batch",
                                "1536", "--out", str(out)], delay_s=d, sig=sig)
        check_artifact(out, old, code, Plan.load)
        assert i or code == 128 + sig, "the early interrupt found the command already done"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", SIGNALS)
def test_validate_calibrate(work, tmp_path, sig):
    """Every fitting layout measured under torchrun, then the calibration written into the cluster
    profile. (When fewer than 4 layouts fit, the calibration refuses in one line: exit 2, nothing
    written; that is the command's own outcome, not the interrupt's.)"""
    from autoplan.profile.formats import ClusterProfile
    cluster = tmp_path / "cluster.json"
    old = old_file(cluster, (work / "cluster.json").read_bytes())
    d = delays(4.0, 12.0, f"validate-{sig}")[1]
    code, _, _ = interrupt(["validate", "--model", str(work / "model.json"), "--cluster", str(cluster),
                            "--global-batch", "4", "--all", "--steps", "1", "--warmup", "0", "--calibrate",
                            "--optimizer", "sgd"], delay_s=d, sig=sig, timeout_s=200, finished=(0, 2))
    assert code == 128 + sig, "validate finished before the interrupt"
    check_artifact(cluster, old, code, ClusterProfile.load)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("elastic", [pytest.param([], id="plain"), pytest.param(["--elastic"], id="elastic")])
@pytest.mark.parametrize("sig", SIGNALS)
def test_run(work, tmp_path, sig, elastic):
    """Training under torchrun (or the elastic agent), checkpointing every 2 steps: the marker always
    names a complete checkpoint, every ``step_*`` directory is complete, temporary files exist only
    inside the one ``*.partial`` directory of a save the signal cut short, the workers end with the
    command."""
    from autoplan.execute.checkpoint import read_latest
    plan = tmp_path / "plan.json"
    plan.write_bytes((work / "plan.json").read_bytes())
    ckpt = tmp_path / "ckpt"
    d = delays(4.0, 12.0, f"run-{sig}-{elastic}")[1]
    code, out, _ = interrupt(["run", str(plan), *elastic, "--", "examples/train_gpt.py", "--steps", "2000", "--ckpt-dir",
                              str(ckpt), "--ckpt-every", "2"], delay_s=d, sig=sig, timeout_s=150)
    assert code == 128 + sig, "the training finished before the interrupt"
    if ckpt.exists():
        read_latest(ckpt)           # None (no checkpoint yet) or a complete one
        partial = [p for p in ckpt.iterdir() if p.name.endswith(".partial")]
        assert len(partial) <= 1, partial
        stray = [p for p in temp_files(ckpt) if not any(q in p.parents for q in partial)]
        assert not stray, stray
        for step in ckpt.glob("step_*"):
            if step not in partial:
                assert (step / ".metadata").is_file(), f"{step} is not a complete checkpoint"


SWALLOWED = """
import os, signal, sys
import autoplan.plan.api as api

real_solve_problem = api.solve_problem

def solve_problem(*args, **kwargs):
    try:      # a library's bare except around an import the interrupt cut short
        os.kill(os.getpid(), signal.{sig})
        signal.pause()
    except:
        pass
    if {then_fails}:      # then the half-imported state fails
        raise AttributeError("module 'numpy' has no attribute 'matrix'")
    return real_solve_problem(*args, **kwargs)      # or the command runs on to write its plan

api.solve_problem = solve_problem
from autoplan.cli import main
main(sys.argv[1:])
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("then_fails", [True, False], ids=["then-fails", "runs-on"])
@pytest.mark.parametrize("sig", SIGNALS)
def test_interrupt_a_library_swallowed_still_ends_as_the_interrupt(tmp_path, sig, then_fails):
    """Seen under load: SIGINT during numpy's import inside `solve` (pulp imports highspy, which imports
    numpy, under a bare ``except:`` in pulp/apis/highs_api.py), the Interrupted swallowed there, then an
    AttributeError from the half-imported numpy came out as a traceback. Also seen (profile cluster,
    SIGTERM): the interrupt swallowed and the command ran on to write its file and exit 0. Either way it
    ends as the interrupt, and the output file is not written."""
    name = signal.Signals(sig).name
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-c", SWALLOWED.format(sig=name, then_fails=then_fails), "solve", "--model", "gpt-tiny",
                           "--cluster", "dgx-a100-80gb:1", "--global-batch", "8", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=100)
    assert proc.returncode == 128 + sig, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == "error: interrupted"
    assert not out.exists()


LATE_SIGNAL = """
import os, signal, sys, threading
import torch.distributed as dist
from autoplan.execute.launch import run_worker
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)

def body():
    if sys.argv[2] == "signal":        # the stop signal comes a moment after the peer's error
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    raise RuntimeError("Connection closed by peer [127.0.0.1]:1234")
sys.exit(run_worker(body))
"""


@pytest.mark.parametrize("then", ["signal", "nothing"])
def test_a_stop_signal_just_after_a_peers_error_ends_the_worker_quietly(tmp_path, then):
    # torchrun stops every worker at once; one that exits first breaks the collective another is
    # blocked in, whose own signal is handled only after the call returns with the peer's error.
    # Seen in CI at 9273af5 (test_run[SIGINT-plain]): that error's traceback, chained with the
    # signal's. The signal within the grace: 130 and no traceback; no signal: the error, as before.
    script = tmp_path / "late.py"
    script.write_text(LATE_SIGNAL)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "store"), then], capture_output=True,
                          text=True, timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    if then == "signal":
        assert proc.returncode == 128 + signal.SIGINT and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    else:
        assert proc.returncode == 1 and "RuntimeError: Connection closed by peer" in proc.stderr
