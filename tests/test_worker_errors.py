"""A training stage that fails says why in the worker's own words.

- ``final_exception``: the last exception of a stderr (chained tracebacks, a message of several
  lines, torch's C++ frames cut off);
- under torchrun (2 processes, a script that raises on rank 1 while rank 0 waits): ``autoplan
  demo``'s training stage ends with ONE ``error:`` line naming rank 1 and its exception, exit 2,
  not torchrun's summary.

    python -m pytest tests/test_worker_errors.py -q
"""

from __future__ import annotations

import pytest

from dist_utils import even_stages

from autoplan.execute.launch import final_exception
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.plan.plan import Layout, Plan, Prediction, SolverInfo, TrainingSpec

CHAINED = """\
some output
Traceback (most recent call last):
  File "a.py", line 1, in <module>
    f()
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 3, in <module>
    g()
    ^^^
RuntimeError: Connection closed by peer [127.0.0.1]:1234
second line of the message
Exception raised from recvBytes at gloo/transport/tcp/pair.cc:1
frame #0: c10::Error::Error
"""


def test_final_exception_is_the_last_one_without_frames():
    assert final_exception(CHAINED) == ("RuntimeError: Connection closed by peer [127.0.0.1]:1234 "
                                        "second line of the message")
    assert final_exception("no traceback here\n") == ""


RAISES_ON_RANK_1 = """\
import os, sys, time
print("step 0 loss 1.0 time_s 0.1", flush=True)
print("some chatter on stderr", file=sys.stderr, flush=True)
if os.environ["RANK"] == "1":
    raise ValueError("the batch has 3 rows, expected 4")
time.sleep(60)      # rank 0 waits; torchrun stops it when rank 1 fails
"""


def _dp2_plan(tmp_path):
    lay = Layout(dp=2, num_microbatches=1, stages=even_stages(BUILTIN_SHAPES["gpt-tiny"].layers, 1))
    plan = tmp_path / "plan.json"
    Plan(layout=lay, predicted=Prediction(step_time_s=0.0, peak_memory_bytes=0, breakdown_s={}),
         solver=SolverInfo(status="hand", objective=0.0, bound=0.0, wall_s=0.0),
         training=TrainingSpec(model_spec="gpt-tiny", shape=None, global_batch=lay.global_batch,
                               seq_len=BUILTIN_SHAPES["gpt-tiny"].seq_len, optimizer="sgd",
                               world_size=lay.world_size)).save(plan)
    return plan


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_failed_training_stage_prints_the_workers_exception(tmp_path, monkeypatch, capsys):
    import autoplan.demo as demo
    from autoplan.cli import main

    plan = _dp2_plan(tmp_path)
    script = tmp_path / "raises.py"
    script.write_text(RAISES_ON_RANK_1)
    monkeypatch.setattr(demo, "train_script", lambda: script)

    def training_stage_only(**_: object) -> int:    # the demo's stages 1-3 (profiles, solve) are not under test
        demo.train_with_plan(plan, 2)
        return 0
    monkeypatch.setattr(demo, "run_demo", training_stage_only)
    with pytest.raises(SystemExit) as ended:
        main(["demo", "--workdir", str(tmp_path)])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: training with ") and err[0].endswith(
        "failed: rank 1 (exit 1): ValueError: the batch has 3 rows, expected 4"), err


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (``SigCgt`` in /proc)."""
    import pathlib
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("script", ["examples/train_gpt.py", "-m autoplan.execute.measure",
                                    "-m autoplan.execute.group_profile"])
def test_a_signal_while_torch_imports_ends_the_worker_quietly(script):
    """Ctrl-C reaching a worker before it has finished importing torch (seconds on a busy machine):
    exit 130 and nothing printed, not a KeyboardInterrupt traceback from inside torch's imports."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, *script.split(), "--help"], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        deadline = time.monotonic() + 30
        while not _catches(proc.pid, signal.SIGTERM) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)          # Python catches SIGINT from the start, SIGTERM only once the hook is in
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert err == "" and out == "", err[-2000:]


REFUSES_ON_RANK_1 = """\
import os, sys, time
if os.environ["RANK"] == "1":
    print("error: this plan asks for something this machine lacks", file=sys.stderr, flush=True)
    sys.exit(2)
time.sleep(60)
"""


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("script, said", [
    (RAISES_ON_RANK_1, "measuring dp2 failed: rank 1 (exit 1): ValueError: the batch has 3 rows, expected 4 "
                       "(all output: {}/measure-attempt1.log)"),
    (REFUSES_ON_RANK_1, "error: this plan asks for something this machine lacks")], ids=["crash", "refusal"])
def test_a_failed_measurement_says_the_workers_own_error(tmp_path, monkeypatch, script, said):
    """validate's measuring job (one torchrun launch per layout or per in-turn set) that fails names the
    failing rank and its exception, not torchrun's ``ChildFailedError`` line; a worker's refusal is said
    as the worker said it, and not launched again."""
    import autoplan.execute.measure as measure
    from autoplan.errors import AutoplanError
    from autoplan.validate import _launch_measure
    plan = _dp2_plan(tmp_path)
    fake = tmp_path / "worker.py"
    fake.write_text(script)
    monkeypatch.setattr(measure, "__file__", str(fake))
    with pytest.raises(AutoplanError) as failed:
        _launch_measure([plan], "dp2", steps=1, warmup=0, workdir=tmp_path, timeout_s=120)
    assert str(failed.value) == said.format(tmp_path)
    assert (tmp_path / "measure-attempt0.log").is_file()
    assert (tmp_path / "measure-attempt1.log").is_file() == ("ValueError" in said)     # a crash is tried again
