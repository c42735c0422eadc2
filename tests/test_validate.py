"""`autoplan validate` from the CLI: runs layouts under torchrun and prints the contract's JSON."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from autoplan.profile.formats import Calibration
from autoplan.validate import Measured, Run, fidelity, fit_calibration, spearman
from autoplan.plan.plan import Layout, Prediction

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_validate_cli_json_matches_the_contract(gpt_tiny_profiles_2proc, tmp_path):
    # the README's one profiling command (tests/conftest.py): the model measured alone and in groups of 2, and the
    # 2 processes' links
    model, cluster = gpt_tiny_profiles_2proc
    assert {g["world"] for g in json.loads(model.read_text())["kinds"]["block"]["group_timings"]} == {2}
    c = json.loads(cluster.read_text())
    assert c["world_size"] == 2 and c["device"]["memory_bytes"] == 256 * 2**20
    proc = subprocess.run([sys.executable, "-m", "autoplan.cli", "validate", "--model", str(model), "--cluster",
                           str(cluster), "--global-batch", "4", "--top-k", "2", "--steps", "1", "--warmup", "1",
                           "--json", "--optimizer", "sgd", "--plot", str(tmp_path / "validate.png"),
                           "--out", str(tmp_path / "fastest.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning:" not in proc.stderr        # the model was measured in groups of the cluster's processes
    assert (tmp_path / "validate.png").read_bytes()[:4] == b"\x89PNG"
    out = json.loads(proc.stdout)
    assert out["chosen"] == 0 and len(out["runs"]) == 2
    # --out: the plan of the layout that ran fastest, which `autoplan run` takes
    from autoplan.plan.plan import Plan
    best = out["runs"][out["fastest_measured"]]
    assert best["measured"]["step_time_s"] == min(r["measured"]["step_time_s"] for r in out["runs"] if r["measured"]
                                                  and (r["measured"].get("in_turn_s") or not best["measured"].get("in_turn_s")))
    assert Plan.load(tmp_path / "fastest.json").layout.to_dict() == best["layout"]
    assert f"wrote {tmp_path / 'fastest.json'}: " in proc.stderr
    for run in out["runs"]:
        assert {"dp", "tp", "pp", "stages"} <= set(run["layout"])
        assert run["predicted"]["step_time_s"] > 0 and run["predicted"]["peak_memory_bytes"] > 0
        assert run["measured"]["step_time_s"] > 0 and run["measured"]["peak_memory_bytes"] > 0
        assert run["layout"]["dp"] * run["layout"]["tp"] * run["layout"]["pp"] == 2


def test_too_few_fitting_layouts_to_calibrate_are_refused_before_anything_runs(monkeypatch):
    from autoplan import validate as v
    from autoplan.errors import InputError
    from autoplan.plan.api import make_problem
    pb = make_problem(str(PROFILES / "gpt-small.cpu.json"), str(PROFILES / "cpu-2proc.json"), 16)
    monkeypatch.setattr(v, "measure_layout", lambda *a, **k: pytest.fail("nothing may run"))
    with pytest.raises(InputError, match=r"--calibrate needs 1000 layouts that fit, and only \d+ fit in .* MiB per "
                                         r"device: give validate a larger --memory-per-device"):
        v.validate(pb, top_k=2, min_layouts=1000)
    # fewer fitting layouts than --top-k asked for: said, and the ones that fit run
    fake = Measured(step_time_s=1.0, peak_memory_bytes=1, step_times_s=[1.0], peak_memory_per_rank_bytes=[1])
    monkeypatch.setattr(v, "measure_layout", lambda *a, **k: fake)
    said: list[str] = []
    runs = v.validate(pb, top_k=100000, progress=said.append)
    assert said[0] == f"only {len(runs)} layouts fit in {pb.cluster.device.memory_bytes / 2**20:.0f} MiB per device " \
                      "(asked for 100000)"
    assert len(said) == len(runs) + 1


def _run(pred_s: float, meas_s: float, terms: dict, pred_mem: int = 100, meas_mem: int = 100, tp: int = 1) -> Run:
    return Run(Layout(tp=tp), Prediction(step_time_s=pred_s, peak_memory_bytes=pred_mem, breakdown_s=terms),
               Measured(step_time_s=meas_s, peak_memory_bytes=meas_mem, step_times_s=[meas_s],
                        peak_memory_per_rank_bytes=[meas_mem]))


def test_calibration_recovers_known_scales():
    """Measurements made from known scales of the terms are fitted back to those scales."""
    truth = dict(compute=1.5, tp=3.0, comm=0.5, overhead=0.2)
    runs = []
    for c, t, d in [(1, 0, 0.2), (2, 0.5, 0.1), (0.5, 1.0, 0.4), (3, 0.2, 0.0), (1.5, 0.0, 1.0)]:
        meas = truth["compute"] * c + truth["tp"] * t + truth["comm"] * d + truth["overhead"]
        runs.append(_run(c + t + d, meas, {"compute": c, "tp_comm": t, "dp_sync": d}, pred_mem=90, meas_mem=100,
                         tp=2 if t else 1))
    cal = fit_calibration(runs, Calibration(), ridge=0.0)
    assert cal.compute_scale == pytest.approx(1.5, rel=1e-6)
    assert cal.tp_scale(2) == pytest.approx(3.0, rel=1e-6)
    assert cal.dp_sync_scale == pytest.approx(0.5, rel=1e-6)
    assert cal.comm_scale == 1.0                       # no run has pipeline sends: stays 1
    assert cal.step_overhead_s == pytest.approx(0.2, rel=1e-6)
    assert cal.memory_overhead_bytes == 10
    # the default prior pulls every scale towards 1, never past the truth
    shrunk = fit_calibration(runs, Calibration())
    assert 1.0 <= shrunk.tp_scale(2) <= 3.0 and 0.5 <= shrunk.dp_sync_scale <= 1.0


def test_calibration_per_tp_degree():
    """Two TP degrees with different true scales, each informed by two runs, get their own scales;
    a degree seen once shares the pooled scale."""
    truth = {2: 2.0, 4: 5.0, 8: 3.0}
    runs = []
    for c, t, tp in [(1, 0, 1), (2, 0, 1), (1, 0.5, 2), (2, 0.2, 2), (1, 0.4, 4), (0.5, 0.3, 4), (1, 0.2, 8)]:
        meas = c + truth.get(tp, 1.0) * t if t else c
        runs.append(_run(c + t, meas, {"compute": c, "tp_comm": t}, tp=tp))
    cal = fit_calibration(runs, Calibration(), ridge=0.0)
    assert cal.tp_comm_scale_by_degree == pytest.approx({2: 2.0, 4: 5.0})
    assert cal.tp_scale(8) == pytest.approx(3.0) and cal.tp_scale(2) == pytest.approx(2.0)
    assert cal.compute_scale == pytest.approx(1.0)


def test_fidelity_figures():
    runs = [_run(1.0, 2.0, {}), _run(2.0, 3.0, {}, pred_mem=80, meas_mem=100), _run(3.0, 1.5, {})]
    f = fidelity(runs)
    assert f.time_mape == pytest.approx((0.5 + 1 / 3 + 1.0) / 3)
    assert f.chosen_vs_fastest == pytest.approx(2.0 / 1.5 - 1)
    assert f.worst_memory_underprediction == pytest.approx(0.2)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_the_api_refuses_what_the_cli_refused():
    """validate's checks are the library's (the CLI only parses options): a catalogue cluster, or no timed step,
    is refused before anything runs."""
    from autoplan.errors import InputError
    from autoplan.plan.api import make_problem
    from autoplan.validate import validate
    with pytest.raises(InputError, match="measured cluster profile"):
        validate(make_problem("gpt-tiny", "dgx-a100-80gb:1", 8))
    measured = make_problem(str(PROFILES / "gpt-small.cpu.json"), str(PROFILES / "cpu-2proc.json"), 8)
    for steps, warmup in ((0, 2), (4, -1)):
        with pytest.raises(InputError, match="--steps must be >= 1 and --warmup >= 0"):
            validate(measured, steps=steps, warmup=warmup)
    with pytest.raises(InputError, match="--confirm must be >= 0"):
        validate(measured, confirm=-1)


def test_the_contenders_are_the_chosen_layout_and_those_measured_faster_or_a_little_slower():
    """A launch minutes apart drifts: a layout measured up to CONFIRM_WITHIN slower than the chosen one is timed
    again beside it too (seed 20261230 w0: 0.5% slower measured once, 14.9% faster in turn)."""
    from autoplan.validate import CONFIRM_WITHIN, contenders
    assert CONFIRM_WITHIN == 0.30
    runs = [_run(1.0, t, {}) for t in (0.128, 0.106, 0.157, 0.117, 0.130, 0.170, 0.166)]
    assert contenders(runs) == [0, 1, 2, 3, 4, 6]                      # 0.157: 23% slower; 0.170: 33%, left out
    assert contenders(runs, within=0.0) == [0, 1, 3]
    assert contenders([_run(1.0, 0.1, {}), _run(1.0, 0.2, {})]) == [0]  # nothing within 30%: nothing to confirm
    assert contenders([Run(Layout(), runs[0].predicted, None, error="x"), *runs[1:]]) == []


def test_confirming_measures_the_contenders_side_by_side_and_judges_them_round_by_round():
    """The chosen layout (measured once 0.128 s) and the two measured faster are timed again together (one job,
    in turn); each one's time becomes the median of its in-turn steps; the others (more than 30% slower) keep
    their one measurement."""
    from autoplan.errors import AutoplanError
    from autoplan.validate import choice_verdict, confirm_contenders
    runs = [_run(1.0, t, {}, tp=tp) for t, tp in ((0.128, 1), (0.106, 2), (0.187, 4), (0.117, 8))]
    asked = []

    def together(rs: list[Run], rounds: int) -> list[list[float]]:
        asked.append(([r.layout.tp for r in rs], rounds))
        return [[0.110, 0.104, 0.108, 0.120], [0.100, 0.140, 0.104, 0.103], [0.121, 0.125, 0.130, 0.119]]

    said = []
    out = confirm_contenders(runs, 3, together, said.append)
    assert asked == [([1, 2, 8], 3)]                                     # one job: all three at once
    assert [r.measured.in_turn_s for r in out] == [[0.110, 0.104, 0.108, 0.120], [0.100, 0.140, 0.104, 0.103], [],
                                                   [0.121, 0.125, 0.130, 0.119]]
    assert [r.measured.step_time_s for r in out] == pytest.approx([0.109, 0.1035, 0.187, 0.123])
    assert runs[0].measured.step_time_s == 0.128                         # the input is left as it was
    assert len(said) == 4 and "in turn in one job (3 rounds)" in said[0]
    f = fidelity(out)
    # paired by round with tp2, the fastest median: 0.110/0.100, 0.104/0.140, 0.108/0.104, 0.120/0.103
    assert f.chosen_vs_fastest == pytest.approx((0.108 / 0.104 + 0.110 / 0.100) / 2 - 1) and f.in_turn_steps == 4
    assert f.chosen_vs_fastest_unpaired == pytest.approx(0.109 / 0.1035 - 1)       # the two medians
    assert "(round by round; +5.3% by the two medians; it and the 2 measured faster" in choice_verdict(f)
    assert f.in_turn_layouts == 3
    q1, _, q3 = statistics.quantiles([0.100, 0.140, 0.104, 0.103], n=4)
    assert f.in_turn_spread == pytest.approx((q3 - q1) / 0.1035)          # the largest of one layout's
    assert "medians of 4 steps" in choice_verdict(f) and "within that noise" in choice_verdict(f)
    assert "it and the 2 measured faster or at most 30% slower" in choice_verdict(f)
    assert confirm_contenders(runs, 0, together) is runs                 # --confirm 0: measured once
    assert "in turn" not in choice_verdict(fidelity(runs))

    def broken(rs, rounds):
        raise AutoplanError("measuring 3 layouts in turn failed (exit 1): RuntimeError: boom")
    said.clear()
    assert confirm_contenders(runs, 2, broken, said.append) == runs      # the first measurements stand
    assert said[-1] == "confirm: failed: measuring 3 layouts in turn failed (exit 1): RuntimeError: boom"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_layouts_measured_in_turn_in_one_job(gpt_tiny_profiles_2proc, tmp_path):
    """Two layouts of the same 2 processes, built side by side in one torchrun job and timed in turn."""
    from autoplan.plan.api import estimate_problem, make_problem
    from autoplan.validate import measure_in_turn
    model, cluster = gpt_tiny_profiles_2proc
    pb = make_problem(str(model), str(cluster), 4, optimizer="sgd")
    runs = [Run(*estimate_problem(pb, Layout(dp=2, mbs=2, num_microbatches=1)), None),
            Run(*estimate_problem(pb, Layout(pp=2, mbs=1, num_microbatches=4)), None)]
    times = measure_in_turn(pb, runs, steps=3, warmup=1, workdir=tmp_path)
    assert len(times) == 2 and all(len(t) == 3 and all(x > 0 for x in t) for t in times)
    assert sorted(p.name for p in tmp_path.glob("plan-in-turn-*.json")) == ["plan-in-turn-0.json",
                                                                          "plan-in-turn-1.json"]


def test_a_gap_inside_the_machines_noise_is_said_to_be():
    from autoplan.validate import choice_verdict
    runs = [_run(1.0, 0.110, {}), _run(1.0, 0.100, {})]
    runs[0].measured.in_turn_s, runs[1].measured.in_turn_s = [0.110, 0.095, 0.125, 0.110], [0.100, 0.098, 0.101, 0.1]
    assert "within that noise" in choice_verdict(fidelity(runs))         # +10% against a 22% spread
    runs[0].measured.in_turn_s = [0.110, 0.109, 0.111, 0.110]
    runs[1].measured.in_turn_s = [0.100, 0.099, 0.101, 0.100]
    assert "within that noise" not in choice_verdict(fidelity(runs))     # +10% against 2%


def test_the_choice_is_set_against_the_fastest_round_by_round():
    """Where the machine slows for a round, every layout of that round slows with it: the chosen layout is
    judged on its steps over the fastest one's of the same round, not on the ratio of two medians; a
    layout measured once, or over another number of rounds, falls back to the medians."""
    from autoplan.validate import paired_excess
    runs = [_run(1.0, 0.110, {}), _run(1.0, 0.100, {})]
    # the chosen one ran 1-7% slower than the other in every round, both slow in the third (medians 0.103, 0.101)
    runs[0].measured.in_turn_s, runs[1].measured.in_turn_s = [0.102, 0.104, 0.150, 0.102], [0.100, 0.102, 0.149, 0.095]
    runs[0].measured.step_time_s, runs[1].measured.step_time_s = 0.103, 0.101
    f = fidelity(runs)
    assert f.chosen_vs_fastest == pytest.approx(statistics.median([1.02, 0.104 / 0.102, 0.150 / 0.149, 0.102 / 0.095]) - 1)
    assert f.chosen_vs_fastest_unpaired == pytest.approx(0.103 / 0.101 - 1)
    assert paired_excess(runs[0].measured, replace(runs[1].measured, in_turn_s=[0.1, 0.1])) is None     # not one job
    runs[0].measured.in_turn_s = []
    f = fidelity(runs)                   # measured once: the medians, and no second figure
    assert f.chosen_vs_fastest == pytest.approx(0.103 / 0.101 - 1) and f.chosen_vs_fastest_unpaired is None


def test_plans_timed_in_turn_take_every_place_in_the_order_alike():
    """Over n rounds each of n plans steps first once, last once, ...: none is always first after the barrier."""
    from autoplan.execute.measure import turn_order
    n = 3
    orders = [turn_order(n, r) for r in range(n)]
    assert orders == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    assert all(sorted(o[place] for o in orders) == list(range(n)) for place in range(n))
    assert turn_order(1, 5) == [0]


def test_contenders_that_do_not_fit_one_gpu_together_are_not_timed_side_by_side(tmp_path, monkeypatch):
    """On a GPU the in-turn job would hold every contender at once: refused in one line before anything runs
    (the first measurements then stand, see confirm_contenders)."""
    from dataclasses import replace
    from autoplan import validate as v
    from autoplan.errors import InputError
    from autoplan.plan.api import make_problem
    pb = make_problem(str(PROFILES / "gpt-small.cpu.json"), str(PROFILES / "cpu-2proc.json"), 16)
    gpu = replace(pb.cluster, device=replace(pb.cluster.device, type="cuda", memory_bytes=150))
    runs = [_run(1.0, 0.1, {}, pred_mem=100), _run(1.0, 0.1, {}, pred_mem=100)]
    monkeypatch.setattr(v, "_launch_measure", lambda *a, **k: pytest.fail("nothing may run"))
    with pytest.raises(InputError, match=r"^2 layouts side by side need 0\.0 GiB per device, more than its 0\.0 GiB: "
                                         r"measured once each$"):
        v.measure_in_turn(replace(pb, cluster=gpu), runs, steps=1, warmup=0, workdir=tmp_path)


def test_a_measurement_record_of_an_older_version_loads():
    """``fidelity.py --reuse`` reloads saved measurements: a key this version no longer has is left out."""
    d = {"step_time_s": 0.1, "peak_memory_bytes": 5, "step_times_s": [0.1], "peak_memory_per_rank_bytes": [5],
         "foreign_cores": 0.0, "launches_s": [0.1, 0.12]}
    m = Measured.from_dict(d)
    assert m == Measured(0.1, 5, [0.1], [5]) and Measured.from_dict(asdict(m)) == m


def test_the_choice_is_judged_on_the_in_turn_job_alone():
    """Timed in turn when the machine ran slow, the chosen layout's median (0.140 s) must not be set against a layout
    left out of the job (measured once 0.135 s, 35% slower than the chosen one's own launch, minutes earlier)."""
    from autoplan.validate import confirm_contenders
    runs = [_run(1.0, t, {}, tp=tp) for t, tp in ((0.100, 1), (0.105, 2), (0.135, 4))]
    out = confirm_contenders(runs, 2, lambda rs, k: [[0.140, 0.141, 0.139], [0.150, 0.149, 0.151]])
    assert [len(r.measured.in_turn_s) for r in out] == [3, 3, 0]
    f = fidelity(out)
    assert f.chosen_vs_fastest == pytest.approx(0.0) and f.in_turn_layouts == 2
    assert fidelity(runs).chosen_vs_fastest == pytest.approx(0.0)      # measured once: against every layout
    assert fidelity([runs[1], runs[0]]).chosen_vs_fastest == pytest.approx(0.105 / 0.100 - 1)


def _timed(run: Run, in_turn: list[float]) -> Run:
    from dataclasses import replace
    import statistics
    return replace(run, measured=replace(run.measured, step_time_s=statistics.median(in_turn), in_turn_s=in_turn))


def test_validate_out_writes_the_layout_that_ran_fastest_in_turn(tmp_path):
    """`validate --out` writes the plan of the fastest layout of the in-turn job (not of a single launch left out of
    it), says how far the model's choice was from it, and writes nothing where no layout ran."""
    from autoplan.errors import InputError
    from autoplan.plan.api import estimate_problem, make_problem
    from autoplan.plan.plan import Plan
    from autoplan.validate import measured_pick, write_measured_pick
    with pytest.warns(Warning):     # a profile measured alone: beside the point here
        pb = make_problem(str(PROFILES / "gpt-small.cpu.json"), str(PROFILES / "cpu-2proc.json"), 16)
    meas = lambda s: Measured(step_time_s=s, peak_memory_bytes=1, step_times_s=[s], peak_memory_per_rank_bytes=[1])  # noqa: E731
    runs = [Run(*estimate_problem(pb, lay), meas(s)) for lay, s in (
        (Layout(dp=2, mbs=2, num_microbatches=4), 0.30), (Layout(pp=2, mbs=1, num_microbatches=16), 0.31),
        (Layout(dp=2, mbs=4, num_microbatches=2), 0.20))]
    assert measured_pick(runs) == 2                                      # measured once each: the fastest launch
    runs[0], runs[1] = _timed(runs[0], [0.33, 0.34, 0.32]), _timed(runs[1], [0.30, 0.31, 0.29])
    assert measured_pick(runs) == 1                                      # in turn: the third was left out
    line = write_measured_pick(pb, runs, tmp_path / "best.json")
    plan = Plan.load(tmp_path / "best.json")
    assert plan.layout == runs[1].layout and plan.solver.status.startswith("measured")
    assert line.startswith(f"wrote {tmp_path / 'best.json'}: {runs[1].layout.short()}, the fastest measured "
                           f"(0.300 s, in turn; predicted ")
    assert line.endswith(f"the model's choice {runs[0].layout.short()} ran 0.330 s, +10.0%")
    runs[0] = _timed(runs[0], [0.28, 0.29, 0.27])
    assert "the model's choice, also the fastest measured (0.280 s, in turn)" in \
        write_measured_pick(pb, runs, tmp_path / "best.json")
    failed = [Run(r.layout, r.predicted, None, error="boom") for r in runs]
    assert measured_pick(failed) is None
    with pytest.raises(InputError, match="no layout could be measured: .*nothing.json not written"):
        write_measured_pick(pb, failed, tmp_path / "nothing.json")
    assert not (tmp_path / "nothing.json").exists()


def test_a_second_job_times_the_first_ones_layouts_and_judges_another_pick():
    """The fidelity harness judges `validate --out`'s pick on a second in-turn job over the first one's layouts."""
    from autoplan.validate import confirm_contenders, in_turn_indices
    runs = [_run(1.0, t, {}, tp=tp) for t, tp in ((0.100, 1), (0.105, 2), (0.200, 4), (0.101, 8))]
    first = confirm_contenders(runs, 1, lambda rs, k: [[0.12, 0.12], [0.11, 0.11], [0.10, 0.10]])
    assert in_turn_indices(first) == [0, 1, 3]
    asked = []
    second = confirm_contenders(first, 1, lambda rs, k: asked.append([r.layout.tp for r in rs]) or
                                [[0.12, 0.12], [0.10, 0.10], [0.11, 0.11]], indices=in_turn_indices(first))
    assert asked == [[1, 2, 8]]
    assert fidelity(second, chosen=3).chosen_vs_fastest == pytest.approx(0.10)      # the first job's fastest
    assert fidelity(second).chosen_vs_fastest == pytest.approx(0.20)                # the model's choice


def test_validate_out_naming_a_directory_is_refused_before_anything_runs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "autoplan.cli", "validate", "--model", str(PROFILES / "gpt-small.cpu.json"),
                           "--cluster", str(PROFILES / "cpu-2proc.json"), "--global-batch", "8", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"error: --out {tmp_path} is a directory; give the plan file to write, "
                                                f"e.g. {tmp_path / 'plan.json'}"]
