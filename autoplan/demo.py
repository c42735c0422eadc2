"""``autoplan demo``: the whole pipeline, real and small, on this machine's CPU.

1. profile the model's layers (torch, this CPU): alone, then inside real groups of NPROC processes
   working at once (TP blocks through DTensor, ZeRO-3 blocks through FSDP2)
2. profile NPROC local gloo processes (collectives, alpha-beta fits), each with a memory budget
3. solve (pulp ILP) under that budget, so the budget decides between DP, ZeRO, TP and PP
4. train a few steps with the chosen plan under torchrun and compare predicted with measured
"""

from __future__ import annotations

import math
import re
import shlex
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from autoplan.errors import InputError

STEP_LINE = re.compile(r"^step (\d+) loss ([-+0-9.eEnaif]+) time_s ([0-9.eE+-]+)")


PROGRESS_EVERY_S = 20.0
"""the in-group profile runs for minutes on a busy machine (10 or more on 2 shared cores): a line at most this often"""


def every(seconds: float, say: Callable[[str], None]) -> Callable[..., None]:
    """A progress callback ``update(done, total, what)`` that says ``done/total what`` when at least ``seconds``
    have passed since it last spoke, and always at the end."""
    last = -math.inf

    def update(done: int, total: int, what: str = "") -> None:
        nonlocal last
        now = time.perf_counter()
        if now - last >= seconds or done >= total:
            last = now
            say(f"{done}/{total} {what}".rstrip())
    return update


def train_script() -> Path:
    """examples/train_gpt.py of this checkout."""
    p = Path(__file__).resolve().parents[1] / "examples" / "train_gpt.py"
    if not p.is_file():
        raise InputError(f"the demo needs examples/train_gpt.py from the autoplan repository (looked at {p})")
    return p


def measured_steps(output: str) -> list[tuple[int, float, float]]:
    """(step, loss, time_s) for each ``step <n> loss <x> time_s <t>`` line."""
    out = []
    for line in output.splitlines():
        m = STEP_LINE.match(line.strip())
        if m:
            out.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    return out


def train_with_plan(plan_path: Path, steps: int, *, lr: float = 0.1, timeout_s: float = 600,
                    script: Path | None = None) -> list[tuple[int, float, float]]:
    """Train ``steps`` steps of ``plan_path`` under torchrun (``script``: default :func:`train_script`)
    and return rank 0's step lines; a failed job raises with the failing worker's own error."""
    from autoplan.execute.launch import torchrun_command, worker_failure
    from autoplan.processes import run_command
    with tempfile.TemporaryDirectory(prefix="autoplan-demo-logs-") as logs:
        cmd = torchrun_command(str(plan_path), str(script or train_script()),
                               ["--steps", str(steps), "--lr", str(lr)], log_dir=logs)
        proc = run_command(cmd, timeout_s=timeout_s)
        if proc.returncode != 0:
            raise InputError(f"training with {plan_path} failed: "
                             f"{worker_failure(logs, proc.stderr, proc.returncode)}")
    return measured_steps(proc.stdout)


def run_demo(*, model: str, nproc: int, memory_per_device: str, global_batch: int, steps: int, workdir: Path) -> int:
    from autoplan.execute.group_profile import GroupProfileConfig, profile_groups_into
    from autoplan.plan.api import Problem, solve_problem
    from autoplan.plan.explain import close_call_summary, close_calls
    from autoplan.plan.training import TrainingConfig
    from autoplan.profile.layers import profile_model
    from autoplan.profile.links import parse_bytes, profile_cluster
    from autoplan.validate import validate_command

    if steps < 2:
        raise InputError("--steps must be at least 2 (the first step is warm-up)")
    mem = parse_bytes(memory_per_device)
    workdir.mkdir(parents=True, exist_ok=True)
    say = lambda s: print(s, flush=True)  # noqa: E731
    t0 = time.perf_counter()

    say(f"[1/4] profiling {model} layers on this CPU ...")
    prof = profile_model(model, mbs_list=(1, 2, 4), repeats=3, threads=1)
    blk = prof.kinds["block"].timing(1, 1)
    say(f"      block fwd {blk.forward_s * 1e3:.2f} ms, bwd {blk.backward_s * 1e3:.2f} ms alone, "
        f"saves {blk.saved_activation_bytes / 2**20:.2f} MiB at mbs 1")
    say(f"      the same inside groups of {nproc} processes working at once (TP via DTensor, ZeRO-3 via FSDP2) ...")
    # one in-group job, not profile model's three on CPU: the demo's layouts differ far beyond a job's noise
    profile_groups_into(prof, GroupProfileConfig(spec=model, mbs_list=(1, 2, 4)), nproc, jobs=1,
                        progress=every(PROGRESS_EVERY_S, lambda s: say("        " + s)))
    prof.save(workdir / "model.json")
    kind = prof.kinds["block"]
    alone = kind.group_timing(1, world=nproc)
    tps = sorted({g.tp for g in kind.group_timings if g.tp > 1})
    if alone is not None:
        parts = [f"{(alone.forward_s + alone.backward_s) * 1e3:.1f} ms with every process busy"]
        for t in tps:
            g = kind.group_timing(1, world=nproc, tp=t)
            if g is not None:
                parts.append(f"{(g.forward_s + g.backward_s) * 1e3:.1f} ms in a TP group of {t}")
        say(f"      block fwd+bwd at mbs 1: {', '.join(parts)} -> {workdir / 'model.json'}")

    say(f"[2/4] profiling {nproc} local processes (gloo collectives) ...")
    cl = profile_cluster(nproc, memory_per_device_bytes=mem)
    cl.save(workdir / "cluster.json")
    ar = cl.links["intra_node"]["all_reduce"]
    g = max(ar)
    say(f"      all_reduce on {g}: {ar[g].latency_s * 1e6:.0f} us + bytes / {ar[g].bandwidth_bytes_per_s / 1e9:.2f} GB/s; "
        f"budget {mem / 2**20:.0f} MiB per process -> {workdir / 'cluster.json'}")

    say(f"[3/4] solving for global batch {global_batch} ...")
    train = TrainingConfig(global_batch=global_batch, precision="fp32", optimizer="sgd")
    plan = solve_problem(Problem(prof, cl, train, str(workdir / "model.json"), str(workdir / "cluster.json")))
    plan.save(workdir / "plan.json")
    for line in plan.explanation:
        say("      " + line)
    near = close_calls(plan)
    if near:
        argv = validate_command(str(workdir / "model.json"), str(workdir / "cluster.json"), global_batch,
                                top_k=len(near) + 1, out=str(workdir / "fastest.json"), optimizer="sgd")
        say(f"      close call: {close_call_summary(plan, near)}; to time them side by side and keep the fastest: "
            f"{shlex.join(argv)}")

    say(f"[4/4] training {steps} steps with the plan (torchrun, {plan.layout.world_size} processes) ...")
    runs = [("chosen", plan.layout, plan.predicted, workdir / "plan.json")]
    # the best layout of another family (different degrees), to show what the choice is worth
    other = plan.other_degrees_alternative()
    if other is not None:
        alt, alt_plan = other
        alt_plan.save(workdir / "plan_alternative.json")
        runs.append((alt.family, alt.layout, alt.predicted, workdir / "plan_alternative.json"))
    say(f"      {'layout':<48} {'predicted':>10} {'measured':>10}  losses")
    results = []
    for name, lay, pred, path in runs:
        rows = train_with_plan(path, steps)
        if len(rows) < 2:
            raise InputError(f"training printed {len(rows)} step lines, expected {steps}")
        measured = statistics.median(t for _, _, t in rows[1:])
        results.append((pred.step_time_s, measured))
        losses = " ".join(f"{l:.3f}" for _, l, _ in rows)
        say(f"      {lay.short():<48} {pred.step_time_s:>9.3f}s {measured:>9.3f}s  {losses}   ({name})")
    if len(results) == 2 and results[0][1] > results[1][1] * 1.05:
        say(f"      the measurement disagrees with the prediction: the alternative ran "
            f"{results[0][1] / results[1][1]:.2f}x faster. Check more layouts, keep the plan of the fastest and fit "
            f"the cost model to this machine with: autoplan validate --model {workdir / 'model.json'} --cluster "
            f"{workdir / 'cluster.json'} --global-batch {global_batch} --optimizer sgd --top-k 4 --calibrate "
            f"--out {workdir / 'fastest.json'}")
    say(f"done in {time.perf_counter() - t0:.0f} s; plan at {workdir / 'plan.json'}")
    return 0
