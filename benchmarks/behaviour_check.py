"""Did a refactor change what autoplan prints or writes? Record the outputs of a fixed list of commands
before it, run them again after it, and compare.

    python benchmarks/behaviour_check.py --record /tmp/before     # on the commit before the change
    python benchmarks/behaviour_check.py --compare /tmp/before    # after it: identical: N, differ: M

The commands: the README's solve / estimate / show commands (text and ``--json``) on the shipped
profiles and on catalogue clusters, the plans they write, every export target, CLI error cases
(stdout, stderr and exit code of each) and ``benchmarks/published_runs.py --no-free``. ``--record``
also measures one small model profile in groups of 2 processes (``profile --model gpt-tiny --nproc 2``,
about 3 minutes on 2 cores; ``--no-measure`` leaves it out) and keeps it in DIR/inputs, so that the
comparison costs the same figures. Only what truly varies between runs is blanked: solver wall
times, the working directory's path. About 3 minutes without the measurement.

Commands run from a fresh working directory, with the checkout this script is in first on PYTHONPATH.
``--compare`` exits 1 when any output differs, after printing a unified diff of each.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

M, C = "model.json", "cluster.json"              # the README's names: gpt-small and 4 CPU processes (shipped)
GM, GC = "group-model.json", "group-cluster.json"  # gpt-tiny measured in groups of 2 processes (--record)
BATCH = ["--global-batch", "16"]
CPU = ["--model", M, "--cluster", C, *BATCH]
GPT3 = ["--model", "gpt3-175b", "--cluster", "dgx-a100-80gb:128", "--global-batch", "1536"]
L70 = ["--model", "llama3-70b", "--cluster", "dgx-h100-80gb:16", "--global-batch", "1024"]
L405 = ["--model", "llama3-405b", "--cluster", "dgx-h100-80gb:72", "--global-batch", "252", "--precision", "fp8",
        "--framework", "megatron"]
L8 = ["--model", "llama3-8b", "--cluster", "dgx-h100-80gb:1", "--global-batch", "8"]


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]           # "autoplan ..." runs the CLI module; "python X ..." runs X from the checkout
    files: tuple[str, ...] = ()     # files the command writes, kept beside its output
    needs_group: bool = False       # uses the profile measured in groups (skipped when there is none)


def _case(name: str, *argv: str, files: tuple[str, ...] = (), needs_group: bool = False) -> Case:
    return Case(name, tuple(argv), files, needs_group)


def cases() -> list[Case]:
    a = "autoplan"
    out = [
        # README walkthrough (shipped profiles stand in for the measured model.json / cluster.json)
        _case("solve", a, "solve", *CPU, "--out", "plan.json", files=("plan.json",)),
        _case("solve-json", a, "solve", *CPU, "--json"),
        _case("solve-48mib", a, "solve", *CPU, "--memory-per-device", "48MiB", "--out", "plan-48.json",
              files=("plan-48.json",)),
        _case("estimate-zero3", a, "estimate", *CPU, "--layout", "dp=4,zero=3"),
        _case("estimate-zero3-json", a, "estimate", *CPU, "--layout", "dp=4,zero=3", "--json"),
        _case("estimate-stages", a, "estimate", *CPU, "--layout", "pp=2,stage_blocks=3/5,mbs=2", "--json"),
        _case("solve-tp2", a, "solve", *CPU, "--layout", "tp=2"),
        _case("solve-zero3", a, "solve", *CPU, "--preset", "zero3", "--json"),
        _case("solve-1f1b", a, "solve", *CPU, "--optimizer", "sgd", "--layout", "pp=4,schedule=1f1b",
              "--out", "plan-1f1b.json", files=("plan-1f1b.json",)),
        _case("show-1f1b", a, "show", "plan-1f1b.json", "--out", "plan-1f1b.svg", "--json"),
        _case("show-1f1b-text", a, "show", "plan-1f1b.json", "--out", "plan-1f1b.png"),
        _case("solve-lossy", a, "solve", *CPU, "--allow-lossy", "fp16,powersgd,localsgd", "--top-k", "2", "--json"),
        _case("solve-per-layer", a, "solve", *CPU, "--memory-per-device", "40MiB", "--per-layer-recompute", "--json"),
        # catalogue clusters
        _case("solve-gpt3", a, "solve", *GPT3),
        _case("solve-gpt3-pp", a, "solve", *GPT3, "--layout", "tp=8,pp=8,schedule=interleaved",
              "--out", "plan-175b.json", files=("plan-175b.json",)),
        _case("show-gpt3", a, "show", "plan-175b.json", "--out", "plan-175b.svg", "--json"),
        _case("solve-llama70-megatron", a, "solve", *L70, "--preset", "megatron", "--out", "plan-70b.json",
              files=("plan-70b.json",)),
        _case("solve-llama70-json", a, "solve", *L70, "--framework", "torchtitan", "--json"),
        _case("estimate-405b-recipe", a, "estimate", *L405, "--layout", "tp=8,pp=9,cp=2,vp=7,mbs=1,sp=1,zero=1"),
        _case("estimate-405b-recipe-json", a, "estimate", *L405, "--layout", "tp=8,pp=9,cp=2,vp=7,mbs=1,sp=1,zero=1",
              "--json"),
        _case("estimate-8b-rowwise", a, "estimate", *L8, "--precision", "fp8-rowwise", "--framework", "torchtitan",
              "--layout", "mbs=1"),
        _case("estimate-8b-adamw-bf16", a, "estimate", *L8, "--optimizer", "adamw-bf16", "--framework",
              "megatron@2024", "--layout", "mbs=2"),
        # exports
        *[_case(f"export-cpu-{to}", a, "export", "plan.json", "--to", to)
          for to in ("megatron", "deepspeed", "accelerate")],
        _case("export-cpu-1f1b-deepspeed-json", a, "export", "plan-1f1b.json", "--to", "deepspeed", "--json"),
        *[_case(f"export-70b-{to}", a, "export", "plan-70b.json", "--to", to)
          for to in ("megatron", "torchtitan", "torchtitan-toml", "deepspeed", "accelerate")],
        _case("export-70b-out", a, "export", "plan-70b.json", "--to", "megatron", "--out", "70b.sh", files=("70b.sh",)),
        # errors: stdout, stderr and exit code
        _case("err-option-typo", a, "solve", "--modle", M, "--cluster", C, *BATCH),
        _case("err-command-typo", a, "solv", *CPU),
        _case("err-missing-file", a, "solve", "--model", "missing.json", "--cluster", C, *BATCH),
        _case("err-malformed-json", a, "solve", "--model", "broken.json", "--cluster", C, *BATCH),
        _case("err-impossible-layout", a, "estimate", *CPU, "--layout", "tp=3"),
        _case("err-unknown-layout-key", a, "estimate", *CPU, "--layout", "tq=2"),
        _case("err-cp-divides-seq", a, "estimate", *L8, "--layout", "cp=3"),
        _case("err-fp8-a100", a, "estimate", "--model", "llama3-8b", "--cluster", "dgx-a100-80gb:1", *BATCH,
              "--precision", "fp8", "--layout", "mbs=1"),
        _case("err-rowwise-megatron", a, "estimate", *L8, "--precision", "fp8-rowwise", "--framework", "megatron",
              "--layout", "mbs=1"),
        _case("err-deepspeed-cp", a, "estimate", *L8, "--framework", "deepspeed", "--layout", "tp=2,cp=2"),
        _case("err-precision", a, "solve", *CPU, "--precision", "bf17"),
        _case("err-optimizer", a, "solve", *CPU, "--optimizer", "adam"),
        _case("err-framework", a, "solve", *CPU, "--framework", "megatronn"),
        _case("err-preset", a, "solve", *CPU, "--preset", "zero4"),
        _case("err-solver", a, "solve", *CPU, "--solver", "gurobi"),
        _case("err-lossy", a, "solve", *CPU, "--allow-lossy", "fp17"),
        _case("err-top-k", a, "solve", *CPU, "--top-k", "-1"),
        _case("err-time-limit", a, "solve", *CPU, "--time-limit", "0"),
        _case("err-fits-nowhere", a, "solve", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb:1", *BATCH),
        _case("err-export-target", a, "export", "plan.json", "--to", "megatronn"),
        _case("err-export-gpt-torchtitan", a, "export", "plan.json", "--to", "torchtitan"),
        _case("err-show-missing", a, "show", "missing-plan.json"),
        _case("err-run-no-script", a, "run", "plan.json"),
        _case("err-run-option", a, "run", "plan.json", "--nproc", "4", "--", "train.py"),
        _case("err-profile-both", a, "profile", "--model", "gpt-tiny"),
        _case("err-profile-cluster-nproc", a, "profile", "cluster", "--nproc", "0", "--out", "x.json"),
        _case("err-profile-model-mbs", a, "profile", "model", "--model", "gpt-tiny", "--out", "x.json", "--mbs", "a"),
        _case("err-validate-catalogue", a, "validate", "--model", M, "--cluster", "dgx-a100-80gb:1", *BATCH),
        _case("err-tokenize-missing", a, "tokenize", "missing.txt", "--tokenizer", "tok", "--out", "t.bin"),
        # the profile measured in groups (in-group coefficients)
        _case("group-solve", a, "solve", "--model", GM, "--cluster", GC, "--global-batch", "8", "--out",
              "plan-group.json", files=("plan-group.json",), needs_group=True),
        _case("group-estimate-tp", a, "estimate", "--model", GM, "--cluster", GC, "--global-batch", "8",
              "--layout", "tp=2", "--json", needs_group=True),
        _case("group-estimate-zero3", a, "estimate", "--model", GM, "--cluster", GC, "--global-batch", "8",
              "--layout", "dp=2,zero=3,mbs=2", needs_group=True),
        _case("group-show", a, "show", "plan-group.json", "--out", "plan-group.svg", "--json", needs_group=True),
        # the published runs, costed by the analytic model
        _case("published-runs", "python", "benchmarks/published_runs.py", "--no-free"),
    ]
    names = [c.name for c in out]
    assert len(set(names)) == len(names), "case names must be unique"
    return out


def _normalize(text: str, work: Path) -> str:
    """Blank what changes from run to run and nothing else."""
    text = text.replace(str(work), "<WORK>").replace(str(REPO), "<REPO>")
    text = re.sub(r'("wall_s": )[-0-9.e+]+', r'\1"<T>"', text)                  # solver time in plan JSON
    text = re.sub(r"(ILPs, )\d+\.\d+ s", r"\1<T> s", text)                      # solve's solver line
    text = re.sub(r"\(\d+\.\d+ s\)", "(<T> s)", text)                           # published_runs' free-solve time
    return text


def _prepare(work: Path, inputs: Path | None) -> bool:
    """The input files of the commands, in WORK. Returns whether the in-group profile is there."""
    shutil.copy(REPO / "profiles" / "gpt-small.cpu.json", work / M)
    shutil.copy(REPO / "profiles" / "cpu-4proc.json", work / C)
    (work / "broken.json").write_text('{"kind": "model_profile", "layers": [')
    have_group = False
    if inputs is not None and (inputs / GM).exists():
        shutil.copy(inputs / GM, work / GM)
        shutil.copy(inputs / GC, work / GC)
        have_group = True
    return have_group


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["COLUMNS"] = "120"
    env.pop("FORCE_COLOR", None)
    return env


def _command(argv: tuple[str, ...]) -> list[str]:
    if argv[0] == "autoplan":
        return [sys.executable, "-m", "autoplan.cli", *argv[1:]]
    return [sys.executable, str(REPO / argv[1]), *argv[2:]]


def run_case(case: Case, work: Path) -> dict[str, str]:
    """What one command printed and wrote, normalized: {"argv", "exit", "stdout", "stderr", "file:NAME"...}."""
    for f in case.files:
        (work / f).unlink(missing_ok=True)
    p = subprocess.run(_command(case.argv), cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
    got = {"argv": " ".join(case.argv), "exit": str(p.returncode),
           "stdout": _normalize(p.stdout, work), "stderr": _normalize(p.stderr, work)}
    for f in case.files:
        got[f"file:{f}"] = _normalize((work / f).read_text(), work) if (work / f).exists() else "<not written>"
    return got


def run_all(work: Path, have_group: bool, only: str | None) -> dict[str, dict[str, str]]:
    results = {}
    for case in cases():
        if (case.needs_group and not have_group) or (only and only not in case.name):
            continue
        t0 = time.perf_counter()
        results[case.name] = run_case(case, work)
        print(f"  {case.name}: exit {results[case.name]['exit']} ({time.perf_counter() - t0:.1f} s)",
              file=sys.stderr, flush=True)
    return results


def measure_group_profile(inputs: Path) -> None:
    """gpt-tiny measured in groups of 2 processes, with its cluster: the inputs that exercise in-group costs."""
    inputs.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "autoplan.cli", "profile", "--model", "gpt-tiny", "--nproc", "2",
                    "--mbs", "1,2", "--memory-per-device", "64MiB", "--model-out", str(inputs / GM),
                    "--cluster-out", str(inputs / GC)], cwd=inputs, env=_env(), check=True)


def _git_commit() -> str:
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def record(directory: Path, measure: bool, only: str | None, label: str | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    inputs = directory / "inputs"
    if measure and not (inputs / GM).exists():
        print("measuring gpt-tiny in groups of 2 processes (inputs/)", file=sys.stderr, flush=True)
        measure_group_profile(inputs)
    with tempfile.TemporaryDirectory(prefix="behaviour-") as tmp:
        work = Path(tmp)
        results = run_all(work, _prepare(work, inputs), only)
    label = label or _git_commit()
    (directory / "outputs.json").write_text(json.dumps({"commit": label, "outputs": results}, indent=1))
    print(f"recorded {len(results)} outputs at {label} in {directory}")


def compare(directory: Path, only: str | None) -> int:
    before = json.loads((directory / "outputs.json").read_text())
    with tempfile.TemporaryDirectory(prefix="behaviour-") as tmp:
        work = Path(tmp)
        have_group = _prepare(work, directory / "inputs")
        after = run_all(work, have_group, only)
    same, differ, missing = 0, [], []
    for name, old in before["outputs"].items():
        if name not in after:
            if not only or only in name:
                missing.append(name)
            continue
        new = after[name]
        if old == new:
            same += 1
            continue
        differ.append(name)
        print(f"=== {name}: {old['argv']}")
        for key in sorted(set(old) | set(new)):
            a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
            if a != b:
                sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                                           f"{key} at {before['commit']}", f"{key} now", n=1))
                print()
    new_names = [n for n in after if n not in before["outputs"]]
    print(f"identical: {same}, differ: {len(differ)}" + (f" ({', '.join(differ)})" if differ else "")
          + (f"; not run now: {', '.join(missing)}" if missing else "")
          + (f"; not recorded: {', '.join(new_names)}" if new_names else "")
          + f" (recorded at {before['commit']}, now {_git_commit()})")
    return 1 if differ or missing else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--record", type=Path, metavar="DIR", help="run the commands and keep their outputs in DIR")
    mode.add_argument("--compare", type=Path, metavar="DIR", help="run them again and compare with DIR's")
    ap.add_argument("--no-measure", action="store_true", help="with --record: skip the profile measured in groups")
    ap.add_argument("--label", help="with --record: what the outputs were recorded at (default: the git commit; "
                                    "give it for a checkout without .git, e.g. from git archive)")
    ap.add_argument("--only", help="only the cases whose name contains this")
    ap.add_argument("--list", action="store_true", help="print the commands and exit")
    args = ap.parse_args()
    if args.list:
        for c in cases():
            print(f"{c.name:32s} {' '.join(c.argv)}")
        return
    if not (args.record or args.compare):
        ap.error("give --record DIR or --compare DIR (or --list)")
    if args.record:
        record(args.record, measure=not args.no_measure, only=args.only, label=args.label)
    else:
        sys.exit(compare(args.compare, args.only))


if __name__ == "__main__":
    main()
