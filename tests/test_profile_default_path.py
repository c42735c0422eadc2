"""The accurate path is the default path.

- A measured model profile without timings from groups of the cluster's processes, used on a
  multi-process cluster profile (solve, estimate, validate): one ``warning:`` line with the exact
  command that measures it; none where in-group figures are there or cannot apply (catalogue clusters).
- ``autoplan profile --model M --nproc N`` writes both profiles in one command, the model measured in
  groups of N (tests/test_validate.py runs it; validate on them warns of nothing); options given to it
  before a subcommand are refused.

    python -m pytest tests/test_profile_default_path.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoplan.cli import main

PROFILES = Path(__file__).resolve().parents[1] / "profiles"
ALONE = PROFILES / "gpt-small.cpu.json"      # measured alone (no --nproc)


def cli(capsys, *args: str) -> tuple[int, list[str]]:
    """Exit code and stderr lines of ``autoplan ARGS`` run in this process."""
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    return ended.value.code, capsys.readouterr().err.splitlines()


def estimate(capsys, model: str, cluster: str) -> tuple[int, list[str]]:
    return cli(capsys, "estimate", "--model", model, "--cluster", cluster, "--global-batch", "8", "--layout", "tp=2")


def test_a_profile_measured_alone_on_processes_warns_with_the_command(capsys):
    code, err = estimate(capsys, str(ALONE), str(PROFILES / "cpu-4proc.json"))
    assert code == 0
    assert err == [f"warning: the model profile {ALONE} was measured alone, not in groups of the cluster's 4 "
                   f"processes: layouts are costed from parts measured alone, which under-predicts collectives and "
                   f"shared cores; measure it: autoplan profile model --model gpt-small --out {ALONE} --mbs 1,2,4 "
                   f"--nproc 4"]
    # a catalogue cluster is costed analytically: nothing to measure in groups
    assert estimate(capsys, str(ALONE), "dgx-a100-80gb:1") == (0, [])


def test_a_model_measured_on_the_fly_is_told_where_to_write_its_profile():
    """``--model gpt-small`` on a measured cluster is profiled alone on the fly (same figures as ALONE)."""
    from autoplan.plan.coefficient_sources import in_group_advice
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    said = in_group_advice(ModelProfile.load(ALONE), ClusterProfile.load(PROFILES / "cpu-2proc.json"), "gpt-small")
    assert said.startswith("the model profile of gpt-small was measured alone, not in groups of the cluster's 2 "
                           "processes")
    assert said.endswith("measure it: autoplan profile model --model gpt-small --out model.json --mbs 1,2,4 "
                         "--nproc 2, then pass --model model.json")


def test_a_shape_file_measured_on_the_fly_is_not_told_to_overwrite_itself(tmp_path):
    """``--model shape.json`` is measured on the fly: the command must write its profile elsewhere, not over
    the shape file (it said ``--out shape.json`` before)."""
    import json

    from autoplan.plan.coefficient_sources import in_group_advice, unmeasured_mbs_note
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps({"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn_hidden": 256, "vocab": 512,
                                 "seq_len": 32}))
    prof, cl = ModelProfile.load(ALONE), ClusterProfile.load(PROFILES / "cpu-2proc.json")
    said = in_group_advice(prof, cl, str(shape))
    assert said.startswith(f"the model profile of {shape} was measured alone")
    assert "--out model.json" in said and said.endswith(", then pass --model model.json")
    note = unmeasured_mbs_note(prof, cl, str(shape), 64)
    assert "--out model.json" in note and f"--out {shape}" not in note


def test_profile_options_go_with_the_command_that_takes_them(capsys, tmp_path):
    """``autoplan profile --model M --nproc N`` measures both (run by tests/test_validate.py, whose validate then
    warns of nothing); its options before a subcommand are refused before anything is measured."""
    assert cli(capsys, "profile", "--nproc", "2", "cluster", "--out", str(tmp_path / "c.json")) == (2, [
        "error: give --nproc after `autoplan profile cluster`, or leave out the subcommand to measure the model "
        "and the cluster in one command"])
    assert cli(capsys, "profile", "--model", "gpt-tiny") == (2, [
        "error: autoplan profile needs --model M and --nproc N (it measures both; or use profile model / "
        "profile cluster)"])
    assert not (tmp_path / "c.json").exists() and not Path("model.json").exists()


def test_a_plan_beyond_the_measured_micro_batch_sizes_says_so_with_the_command():
    """A measured profile timed at mbs 1, 2, 4: a plan at mbs 8 is costed from an extrapolation and its
    explanation says so, with the command that measures mbs 8; one at a measured size says nothing."""
    import warnings

    from autoplan.plan.api import solve
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        beyond = solve(str(ALONE), str(PROFILES / "cpu-2proc.json"), 16, layout="dp=2,mbs=8")
        inside = solve(str(ALONE), str(PROFILES / "cpu-2proc.json"), 16, layout="dp=2,mbs=4")
    note = [l for l in beyond.explanation if "micro-batch size 8" in l]
    assert len(note) == 1 and "(1, 2, 4)" in note[0], beyond.explanation
    assert note[0].endswith(f"--out {ALONE} --mbs 1,2,4,8 --nproc 2"), note[0]
    assert not any("micro-batch size" in l for l in inside.explanation), inside.explanation


def test_a_spec_that_does_not_resolve_gets_the_note_not_an_error():
    """A Problem built in code names its model with a placeholder ("m"): the advisory notes must still be a
    line telling where to write the profile, not an InputError out of ``solve_problem``."""
    from autoplan.plan.coefficient_sources import in_group_advice, unmeasured_mbs_note
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    prof, cl = ModelProfile.load(ALONE), ClusterProfile.load(PROFILES / "cpu-2proc.json")
    note = unmeasured_mbs_note(prof, cl, "m", 64)
    assert "--out model.json" in note and note.endswith(", then pass --model model.json")
    assert in_group_advice(prof, cl, "missing.json").startswith("the model profile of missing.json was measured")
