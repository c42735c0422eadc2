"""The accurate path is the default path.

- A measured model profile without timings from groups of the cluster's processes, used on a
  multi-process cluster profile (solve, estimate, validate): one ``warning:`` line with the exact
  command that measures it; none where in-group figures are there or cannot apply (catalogue clusters).
- ``autoplan profile --model M --nproc N`` writes both profiles in one command, the model measured in
  groups of N: planning on them warns of nothing.

    python -m pytest tests/test_profile_default_path.py -q
"""

from __future__ import annotations

import json
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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_profile_with_nproc_measures_model_in_groups_and_cluster(tmp_path, capsys):
    model, cluster = tmp_path / "m.json", tmp_path / "c.json"
    code, err = cli(capsys, "profile", "--model", "gpt-tiny", "--nproc", "2", "--mbs", "1", "--repeats", "1",
                    "--max-size", "64KiB", "--memory-per-device", "64MiB", "--model-out", str(model),
                    "--cluster-out", str(cluster))
    assert code == 0, err
    m, c = json.loads(model.read_text()), json.loads(cluster.read_text())
    assert {g["world"] for g in m["kinds"]["block"]["group_timings"]} == {2}
    assert c["world_size"] == 2 and c["device"]["memory_bytes"] == 64 * 2**20
    assert estimate(capsys, str(model), str(cluster)) == (0, [])
    # the old subcommands still measure one each; options of theirs go after their name
    assert cli(capsys, "profile", "--nproc", "2", "cluster", "--out", str(cluster))[0] == 2
