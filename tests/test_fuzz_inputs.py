"""Fuzzed inputs: every file a user hands in and every option string either works or ends with ONE
``error:`` line and exit code 2: never a traceback, never a hang.

Property-based (hypothesis, derandomized so CI runs the same cases every time), mostly in-process:

- model profiles, cluster profiles, plans and shape JSON files, mutated as JSON trees (NaN, inf,
  negative, huge and boolean numbers, wrong types, missing and unknown keys, other schema versions)
  and broken as text (truncated, spliced bytes, deep nesting, 5000-digit integers, binary); each is
  loaded by the library's loader and, when accepted, must be usable: the cost model prices a layout
  on it with finite figures (or refuses with an AutoplanError);
- option strings (``--layout``, sizes like ``48MiB``, ``--mbs`` lists, model and cluster specs,
  presets, numbers) through the parsers and through ``autoplan.cli.main`` in this process;
- a smaller set of real ``python -m autoplan.cli`` subprocesses on mutated files.

About 2,400 generated cases; about 30-60 s on 2 cores.

    python -m pytest tests/test_fuzz_inputs.py -q --hypothesis-show-statistics
"""

from __future__ import annotations

import atexit
import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli_utils import run_cli
from fuzz_inputs import (CLUSTER_DOCS, MODEL_DOCS, SHAPE_DOCS, cluster_spec_text, corrupted_text, int_list_text,
                         layout_text, model_spec_text, mutated_doc, plausible_doc, size_text)

from autoplan.errors import AutoplanError

REPO = Path(__file__).resolve().parents[1]
FUZZ = settings(deadline=None, database=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])
"""derandomized: the same cases on every run (a CI failure reproduces); no example database on disk"""


def fuzz(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples)

WORK = Path(tempfile.mkdtemp(prefix="autoplan-fuzz-"))
"""files the in-process tests write (hypothesis examples cannot use function-scoped fixtures)"""
atexit.register(shutil.rmtree, WORK, ignore_errors=True)


def one_line(message: str) -> None:
    assert message and "\n" not in message.strip(), f"error message is not one line: {message!r}"


def write(name: str, content: bytes | dict) -> Path:
    p = WORK / name
    p.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return p


def cli(*argv: str) -> tuple[int, str, str]:
    """``autoplan.cli.main(argv)`` in this process: (exit code, stdout, stderr)."""
    proc = run_cli(*argv)
    return proc.returncode, proc.stdout, proc.stderr


def assert_works_or_one_error(code: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err[-3000:]
    assert code in (0, 2), (code, out[-500:], err[-2000:])
    if code == 2:
        lines = [l for l in err.splitlines() if l.strip()]
        if lines and lines[0].startswith("Usage: "):     # a usage error (e.g. a value outside an option's choices):
            lines = lines[2 if len(lines) > 1 and lines[1].startswith("Try '") else 1:]   # click's usage, hint
        assert len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]


# -- the artifacts, through their loaders ------------------------------------------------------------

def cluster_for_tests():
    from autoplan.profile.formats import ClusterProfile
    return ClusterProfile.from_dict(CLUSTER_DOCS[0])


def model_for_tests():
    from autoplan.profile.formats import ModelProfile
    return ModelProfile.from_dict(MODEL_DOCS[0])


def price(profile, cluster, layout: dict, global_batch: int = 8) -> None:
    """Cost ``layout`` with the planner's model: an AutoplanError or finite figures."""
    from autoplan.plan.api import Problem, complete_layout, estimate_problem
    from autoplan.plan.training import TrainingConfig
    pb = Problem(profile, cluster, TrainingConfig(global_batch=global_batch), "fuzz", "fuzz")
    try:
        lay, pred = estimate_problem(pb, complete_layout(layout, cluster.world_size, global_batch))
    except AutoplanError as e:
        one_line(str(e))
        return
    assert math.isfinite(pred.step_time_s) and pred.step_time_s >= 0, pred
    assert pred.peak_memory_bytes >= 0
    assert all(math.isfinite(v) for v in pred.breakdown_s.values()), pred.breakdown_s


@fuzz(400)
@given(mutated_doc(MODEL_DOCS))
def test_model_profile_documents(doc):
    from autoplan.profile.formats import ModelProfile
    try:
        prof = ModelProfile.from_dict(doc, "fuzz.json")
    except AutoplanError as e:
        one_line(str(e))
        event("refused")
        return
    event("accepted")
    again = ModelProfile.from_dict(json.loads(json.dumps(prof.to_dict())), "again")    # what it writes, it reads
    assert json.dumps(again.to_dict()) == json.dumps(prof.to_dict())
    cluster = cluster_for_tests()
    price(prof, cluster, {"dp": 4})
    price(prof, cluster, {"pp": 2, "dp": 2})


@fuzz(400)
@given(mutated_doc(CLUSTER_DOCS))
def test_cluster_profile_documents(doc):
    from autoplan.profile.formats import ClusterProfile
    try:
        cl = ClusterProfile.from_dict(doc, "fuzz.json")
    except AutoplanError as e:
        one_line(str(e))
        event("refused")
        return
    event("accepted")
    again = ClusterProfile.from_dict(json.loads(json.dumps(cl.to_dict())), "again")
    assert json.dumps(again.to_dict()) == json.dumps(cl.to_dict())
    prof = model_for_tests()
    for layout in ({"tp": 1, "pp": 1}, {"pp": 2}, {"tp": 2}):
        if cl.world_size % (layout.get("tp", 1) * layout.get("pp", 1)) == 0:
            price(prof, cl, layout, global_batch=cl.world_size * 2)


@fuzz(250)
@given(st.one_of(plausible_doc(MODEL_DOCS).map(lambda d: ("model", d)),
                 plausible_doc(CLUSTER_DOCS).map(lambda d: ("cluster", d))))
def test_extreme_but_well_typed_numbers(case):
    """0, 1e-12, 2**61 ... where the loaders accept them: the cost model must still price layouts
    with finite figures, or refuse in one line."""
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    kind, doc = case
    try:
        if kind == "model":
            prof, cl = ModelProfile.from_dict(doc, "fuzz.json"), cluster_for_tests()
        else:
            prof, cl = model_for_tests(), ClusterProfile.from_dict(doc, "fuzz.json")
    except AutoplanError as e:
        one_line(str(e))
        event("refused")
        return
    event("accepted")
    for layout in ({"tp": 1, "pp": 1}, {"pp": 2}, {"tp": 2}, {"pp": 2, "mbs": 2}):
        if cl.world_size % (layout.get("tp", 1) * layout.get("pp", 1)) == 0:
            price(prof, cl, layout, global_batch=cl.world_size * 2)


_PLAN_DOCS: list[dict] = []


def plan_docs() -> list[dict]:
    """Two real plans (solved once): one with pipeline stages, one with the alternatives' infinities."""
    if not _PLAN_DOCS:
        from autoplan.plan.api import Problem, solve_problem
        from autoplan.plan.training import TrainingConfig
        from autoplan.plan.search import SearchOptions
        prof, cl = model_for_tests(), cluster_for_tests()
        for fixed in ({}, {"pp": 2}):
            plan = solve_problem(Problem(prof, cl, TrainingConfig(global_batch=8), "model.json", "cluster.json"),
                                 SearchOptions(fixed=fixed))
            _PLAN_DOCS.append(json.loads(json.dumps(plan.to_dict())))
    return _PLAN_DOCS


@st.composite
def mutated_plan(draw):
    return draw(mutated_doc(plan_docs()))


@fuzz(400)
@given(mutated_plan())
def test_plan_documents(doc):
    from autoplan.plan.plan import Plan
    try:
        plan = Plan.from_dict(doc, "fuzz.json")
    except AutoplanError as e:
        one_line(str(e))
        event("refused")
        return
    event("accepted")
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())), "again")
    assert json.dumps(again.to_dict()) == json.dumps(plan.to_dict())
    plan.layout.short()
    try:
        plan.layout.check_against(plan.training.world_size, model_for_tests().layer_names(),
                                  plan.training.global_batch)
    except AutoplanError as e:
        one_line(str(e))


@fuzz(200)
@given(mutated_doc(SHAPE_DOCS), st.sampled_from(["dgx-a100-80gb:1", "dgx-h100-80gb:2"]))
def test_shape_files(doc, cluster):
    """A shape JSON as --model: planned analytically on a catalogue cluster."""
    from autoplan.plan.api import complete_layout, estimate_problem, make_problem
    path = write("shape.json", doc)
    try:
        pb = make_problem(str(path), cluster, 64)
        world = pb.cluster.world_size
        estimate_problem(pb, complete_layout({"dp": world}, world, 64))
    except AutoplanError as e:
        one_line(str(e))


def _doc_of(kind: str) -> dict:
    return {"model": MODEL_DOCS[1], "cluster": CLUSTER_DOCS[1], "plan": plan_docs()[1], "shape": SHAPE_DOCS[0]}[kind]


@st.composite
def corrupted_file(draw):
    kind = draw(st.sampled_from(["model", "cluster", "plan", "shape"]))
    return kind, draw(corrupted_text(_doc_of(kind)))


@fuzz(300)
@given(corrupted_file())
def test_corrupted_files(case):
    """Truncated, spliced, deeply nested, binary: each loader refuses with one line (or reads what is
    still valid)."""
    from autoplan.models.source import resolve_model
    from autoplan.plan.plan import Plan
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    kind, content = case
    path = write(f"corrupt-{kind}.json", content)
    load = {"model": ModelProfile.load, "cluster": ClusterProfile.load, "plan": Plan.load, "shape": resolve_model}[kind]
    try:
        load(path)
    except AutoplanError as e:
        one_line(str(e))


# -- option strings ---------------------------------------------------------------------------------------

@fuzz(300)
@given(layout_text())
def test_layout_strings(text):
    from autoplan.plan.api import complete_layout
    from autoplan.plan.layout_input import parse_layout_constraints
    try:
        fixed = parse_layout_constraints(text)
        complete_layout(fixed, 8, 16)
    except AutoplanError as e:
        one_line(str(e))


@fuzz(200)
@given(size_text())
def test_size_strings(text):
    from autoplan.profile.links import parse_bytes
    try:
        n = parse_bytes(text)
    except AutoplanError as e:
        one_line(str(e))
        return
    assert isinstance(n, int) and 0 <= n < 2**62


@fuzz(100)
@given(int_list_text())
def test_int_list_strings(text):
    from autoplan.cli.common import int_list
    try:
        vals = int_list(text, "--mbs")
    except AutoplanError as e:
        one_line(str(e))
        return
    assert vals and all(isinstance(v, int) and v >= 1 for v in vals)


@fuzz(150)
@given(model_spec_text(), cluster_spec_text())
def test_model_and_cluster_specs(model, cluster):
    """Specs planned on a catalogue cluster (analytic profiles: nothing is measured)."""
    from autoplan.plan.api import make_problem
    try:
        make_problem(model, cluster, 64)
    except AutoplanError as e:
        one_line(str(e))


# -- the command line, in this process ------------------------------------------------------------------

def _files() -> tuple[Path, Path]:
    return write("good-model.json", MODEL_DOCS[0]), write("good-cluster.json", CLUSTER_DOCS[0])


@st.composite
def solve_argv(draw) -> list[str]:
    model, cluster = _files()
    cmd = draw(st.sampled_from(["solve", "estimate"]))
    argv = [cmd, "--model", str(model), "--cluster", str(cluster),
            f"--global-batch={draw(st.sampled_from([-1, 0, 1, 3, 8, 16, 2**21, 10**30]))}"]
    argv += ["--layout", draw(layout_text())] if cmd == "estimate" or draw(st.booleans()) else []
    for opt, values in [("--memory-per-device", size_text()), ("--precision", st.sampled_from(["fp32", "bf16", "fp8", ""])),
                        ("--optimizer", st.sampled_from(["sgd", "adamw", "lion"])),
                        ("--seq-len", st.sampled_from(["0", "-4", "16", "99999999999"]))]:
        if draw(st.integers(0, 3)) == 0:
            argv += [f"{opt}={draw(values)}"]
    if cmd == "solve":
        for opt, values in [("--top-k", st.sampled_from(["-1", "0", "2", "1000000"])),
                            ("--time-limit", st.sampled_from(["nan", "inf", "-1", "0", "1e-9", "2", "1e300"])),
                            ("--preset", st.sampled_from(["ddp", "zero3", "megatron", "zero9", ""])),
                            ("--allow-lossy", st.sampled_from(["fp16", "powersgd,localsgd", "gzip", ",", ""]))]:
            if draw(st.integers(0, 3)) == 0:
                argv += [f"{opt}={draw(values)}"]
    return argv


@fuzz(150)
@given(solve_argv())
def test_cli_solve_and_estimate_options(argv):
    assert_works_or_one_error(*cli(*argv))


BAD_SIZES = ["", "MiB", "-1MiB", "1.5XB", "nan", "inf", "9" * 400 + "TiB", "1e3", "twelve", "4 MiB MiB"]


@st.composite
def refused_argv(draw) -> list[str]:
    """Commands that would start processes or measure when given good values: given only values that
    must be refused before anything starts."""
    model, cluster = _files()
    bad_file = write("bad-plan.json", draw(mutated_plan()))
    return draw(st.sampled_from([
        ["profile", "cluster", f"--nproc={draw(st.sampled_from([-3, 0, 10**6, 10**30]))}", "--out",
         str(WORK / "c.json")],
        ["profile", "cluster", "--nproc=2", f"--max-size={draw(st.sampled_from(BAD_SIZES))}",
         "--out", str(WORK / "c.json")],
        ["profile", "model", "--model", draw(model_spec_text()), f"--mbs={draw(int_list_text())}", "--out",
         str(WORK / "m.json"), "--tp=0"],
        ["validate", "--model", str(model), "--cluster", draw(cluster_spec_text()), "--global-batch=8"],
        ["validate", "--model", str(model), "--cluster", str(cluster), "--global-batch=8",
         f"--steps={draw(st.sampled_from([0, -1]))}"],
        ["run", str(bad_file), "--", "no-such-script.py"],
    ]))


@fuzz(80)
@given(refused_argv())
def test_cli_refusals_before_starting_anything(argv):
    code, out, err = cli(*argv)
    assert_works_or_one_error(code, out, err)
    assert code == 2, (argv, out[-500:], err[-500:])


# -- real processes --------------------------------------------------------------------------------------

@st.composite
def subprocess_case(draw):
    kind = draw(st.sampled_from(["model", "cluster", "plan"]))
    doc = draw(mutated_doc({"model": MODEL_DOCS, "cluster": CLUSTER_DOCS, "plan": plan_docs()}[kind]))
    return kind, doc


@pytest.mark.timeout(240)
@fuzz(12)
@given(subprocess_case())
def test_cli_subprocess_on_mutated_files(case):
    """The console entry point on disk: exit 0 or exactly one `error:` line and exit 2."""
    kind, doc = case
    model, cluster = _files()
    path = write(f"sub-{kind}.json", doc)
    out = WORK / "sub-plan-out.json"
    if kind == "plan":
        argv = ["run", str(path), "--", "no-such-script.py"]
    else:
        argv = ["solve", "--model", str(path if kind == "model" else model),
                "--cluster", str(path if kind == "cluster" else cluster), "--global-batch", "8", "--out", str(out)]
    proc = subprocess.run([sys.executable, "-m", "autoplan.cli", *argv], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    if kind == "plan" and proc.returncode == 2 and "training script not found" in proc.stderr:
        pass     # the plan was accepted; the script is missing on purpose
    assert_works_or_one_error(proc.returncode, proc.stdout, proc.stderr)
