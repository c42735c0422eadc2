"""Layers measured inside real process groups (profile model --nproc) and costed from them."""

import json

import pytest

from autoplan.execute.pipeline_profile import balanced_chunks
from autoplan.plan.api import Problem, complete_layout, estimate_problem
from autoplan.plan.coefficient_sources import in_group_world
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.training import TrainingConfig
from autoplan.profile.formats import ClusterProfile, GroupTiming, ModelProfile


CP_TP_MODEL = "hf:llama-tiny,layers=2"    # rotary positions, grouped-query attention (4 heads, 2 KV heads), s = 32


def cp_tp_worker(rank: int, world_size: int, spec: str) -> dict:
    """On 4 processes: the group job's case list, and its block wrapped for cp 2 x tp 2 (sp 0 and 1)
    against the unwrapped block on the whole sequence (this rank's share of the output), with the
    case's timed forward and backward."""
    import torch

    from autoplan.execute.group_measure import GroupProfileConfig, _Job, _make_case, _points, _unit_copy, time_pairs
    from autoplan.models.attention import SequenceShard
    cfg = GroupProfileConfig(spec=spec, mbs_list=(2,), repeats=1, warmup=1, min_sample_s=0.0, max_attempts=1,
                             pipelines=False)
    job = _Job(cfg, torch.device("cpu"))
    out: dict = {"points": [(k.name, mbs, tp, sp, dp, cp) for k, mbs, tp, sp, dp, cp in _points(job)]}
    kind = next(k for k in job.kinds if k.name == "block")
    cp_mesh, tp_mesh = job.cp_tp_meshes(2, 2)
    x = job.inputs[2][kind.units[0]]
    with torch.no_grad():
        ref = SequenceShard(cp_mesh.get_local_rank(), 2).take(_unit_copy(job, kind)(x), dim=1)
    for sp in (0, 1):
        case = _make_case(job, kind, 2, tp=2, sp=sp, cp=2)
        with torch.no_grad():
            got = case.forward()
        want = ref.chunk(2, dim=1)[tp_mesh.get_local_rank()] if sp else ref
        out[sp] = (tuple(got.shape), float((got - want).abs().max()), time_pairs(case, cfg, job.device))
    return out


SHARED_JOBS = {"cp_tp": (4, cp_tp_worker, (CP_TP_MODEL,), 150)}   # tests/conftest.py


@pytest.mark.slow
def test_group_job_times_the_block_under_cp_with_tp_as_the_executor_wraps_it(shared_jobs):
    results = shared_jobs.get(__name__, "cp_tp")
    points = results[0]["points"]
    assert all(r["points"] == points for r in results)
    # cp 2 x tp 2 tiles 4 processes: with and without SP, the block only; cp 4 has no TP beside it
    assert {p for p in points if p[2] > 1 and p[5] > 1} == {("block", 2, 2, 0, 1, 2), ("block", 2, 2, 1, 1, 2)}
    for r in results:
        for sp in (0, 1):
            shape, err, (fwd_s, bwd_s) = r[sp]
            assert shape == (2, 32 // 2 // (2 if sp else 1), 64)      # [b, s/cp(/tp), h]
            assert err < 1e-5 and fwd_s > 0 and bwd_s > 0


@pytest.fixture(scope="module")
def grouped(gpt_tiny_profiles_2proc):
    """gpt-tiny measured by `profile model --nproc 2 --mbs 1,2` (run once for the session: tests/conftest.py)."""
    return ModelProfile.load(gpt_tiny_profiles_2proc[0])


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test of the session to read the profiles runs them
def test_profile_in_groups_writes_every_case(grouped):
    block = grouped.kinds["block"]
    keys = {(g.world, g.tp, g.sp, g.dp, g.cp, g.mbs) for g in block.group_timings}
    for mbs in (1, 2):      # alone, TP, TP+SP, ZeRO-3 and context parallel over the 2 processes
        assert {(2, 1, 0, 1, 1, mbs), (2, 2, 0, 1, 1, mbs), (2, 2, 1, 1, 1, mbs), (2, 1, 0, 2, 1, mbs),
                (2, 1, 0, 1, 2, mbs)} <= keys
    assert all(g.cp == 1 for k in ("embed", "head") for g in grouped.kinds[k].group_timings)
    for g in block.group_timings:
        assert g.forward_s > 0 and g.backward_s > 0 and g.optimizer_s > 0
        assert (g.backward_sync_s > 0) == (g.dp > 1)
    assert {g.mbs for g in grouped.whole_model_timings} == {1, 2}
    # and under DDP over both processes: the step with its gradients all-reduced
    assert all(g.backward_sync_s >= g.backward_s > 0 for g in grouped.whole_model_timings)
    assert any(g.backward_sync_s > g.backward_s for g in grouped.whole_model_timings)
    assert all(k.group_timing(1, world=2) is not None for k in grouped.kinds.values())
    # short real pipelines of the model (2 stages, 1F1B and interleaved at vp 2 and at vp 3, the deepest
    # its 6 units allow, 2 and 8 micro-batches) and what they say a pipeline costs beyond its layers
    runs = {(t.pp, t.vp, t.schedule, t.num_microbatches) for t in grouped.pipeline_timings}
    assert runs == {(2, 1, "1f1b", 2), (2, 1, "1f1b", 8), (2, 2, "interleaved", 2), (2, 2, "interleaved", 8),
                    (2, 3, "interleaved", 2), (2, 3, "interleaved", 8)}
    assert all(t.step_s > 0 and t.world == 2 and t.mbs == 1 for t in grouped.pipeline_timings)
    # their chunks balanced by the units' in-group times, as a planner splits the stages
    unit_s = [(lambda g: g.forward_s + g.backward_s)(grouped.kinds[i.kind].group_timing(1, world=2))
              for i in grouped.layers]
    assert all(tuple(t.chunks) == balanced_chunks(unit_s, t.pp * t.vp) for t in grouped.pipeline_timings)
    costs = grouped.pipeline_cost(2)
    assert costs is not None and costs.per_chunk_s >= 0 and 0 <= costs.idle_share <= 1


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test of the session to read the profiles runs them
def test_cost_model_uses_group_figures(grouped, gpt_tiny_profiles_2proc):
    cl = ClusterProfile.load(gpt_tiny_profiles_2proc[1])      # profile cluster --nproc 2 --max-size 64KiB --repeats 2
    assert in_group_world(grouped, cl) == 2
    train = TrainingConfig(global_batch=4)
    pb = Problem(grouped, cl, train, "m", "c")
    lay, pred = estimate_problem(pb, complete_layout({"tp": 2, "sp": 1}, 2, 4))
    g = grouped.kinds["block"].group_timing(1, world=2, tp=2, sp=1)
    costs = layer_costs(grouped, cl, lay, train)
    # the TP block's forward+backward is the measured in-group time, split into compute and tp_comm
    blk = costs["block.0"]
    base = grouped.kinds["block"].group_timing(1, world=2)
    from autoplan.plan.coefficient_sources import composition_factors
    f, _ = composition_factors(grouped, 2, 1)
    assert blk.compute_s + blk.tp_comm_s == pytest.approx(min(g.forward_s + g.backward_s,
                                                              (base.forward_s + base.backward_s) / 2) * f
                                                          + max(0.0, g.forward_s + g.backward_s
                                                                - (base.forward_s + base.backward_s) / 2))
    # on a cluster of another size the figures do not apply: the sum of parts is used
    other = ModelProfile.from_dict(grouped.to_dict())
    for k in other.kinds.values():
        k.group_timings = [GroupTiming(**{**g.__dict__, "world": 4}) for g in k.group_timings]
    assert in_group_world(other, cl) is None


def test_group_timing_fit_and_validation():
    g1 = GroupTiming(world=4, mbs=1, tp=2, forward_s=1.0, backward_s=2.0, optimizer_s=0.5)
    g4 = GroupTiming(world=4, mbs=4, tp=2, forward_s=4.0, backward_s=8.0, optimizer_s=0.5)
    from autoplan.profile.formats import LayerKindProfile, LayerTiming
    kind = LayerKindProfile(param_count=1, param_bytes=4, tp_shardable=True,
                            timings=[LayerTiming(1, 1, 1.0, 2.0, 10, 10)], group_timings=[g1, g4])
    mid = kind.group_timing(2, world=4, tp=2)
    assert mid.forward_s == pytest.approx(2.0) and mid.backward_s == pytest.approx(4.0) and mid.optimizer_s == 0.5
    assert kind.group_timing(2, world=2, tp=2) is None and kind.group_timing(1, world=4, tp=4) is None
    d = {"schema_version": 1, "kind": "model_profile", "model": {"spec": "x"}, "precision": "fp32", "seq_len": 8,
         "layers": [{"name": "block.0", "kind": "block"}], "edges": [],
         "kinds": {"block": {"param_count": 1, "param_bytes": 4, "tp_shardable": True,
                             "timings": [{"mbs": 1, "forward_s": 1, "backward_s": 1, "saved_activation_bytes": 1,
                                          "output_bytes": 1}],
                             "group_timings": [{"world": 2, "mbs": 1, "forward_s": -1.0}]}}}
    from autoplan.errors import InputError
    with pytest.raises(InputError, match="malformed"):
        ModelProfile.from_dict(json.loads(json.dumps(d)))


def _cp_profile(cp_figures: bool, world: int = 2) -> ModelProfile:
    """A synthetic profile "measured" in groups of ``world`` (twice each layer's time alone; the block
    also under TP 2, with and without SP, at 0.7x); with ``cp_figures`` its block also under cp = 2
    (times TP 2 with and without SP where ``world`` is 4): 0.8x its in-group time per rank (far from half;
    0.7x with SP)."""
    import random

    from tests.planner_instances import random_model_profile
    prof = random_model_profile(random.Random(5), n_blocks=2)
    for name, kind in prof.kinds.items():
        kind.group_timings = [GroupTiming(world=world, mbs=t.mbs, forward_s=2 * t.forward_s,
                                          backward_s=2 * t.backward_s, optimizer_s=1e-4) for t in kind.timings]
        if name != "block":
            continue
        alone = list(kind.group_timings)
        kind.group_timings += [GroupTiming(world=world, mbs=g.mbs, tp=2, sp=sp, forward_s=0.7 * g.forward_s,
                                           backward_s=0.7 * g.backward_s, optimizer_s=1e-4)
                               for g in alone for sp in (0, 1)]
        if cp_figures:
            tps = [(1, 0)] + ([(2, 0), (2, 1)] if world == 4 else [])
            kind.group_timings += [GroupTiming(world=world, mbs=g.mbs, tp=tp, sp=sp, cp=2,
                                               forward_s=(0.8 - 0.1 * sp) * g.forward_s,
                                               backward_s=(0.8 - 0.1 * sp) * g.backward_s, optimizer_s=1e-4)
                                   for g in alone for tp, sp in tps]
    return prof


def test_cp_group_timings_round_trip_and_old_profiles_load_unchanged():
    with_cp, old = _cp_profile(True), _cp_profile(False)
    d = json.loads(json.dumps(with_cp.to_dict()))
    assert sorted(g.get("cp", 1) for g in d["kinds"]["block"]["group_timings"]) == [1] * 9 + [2] * 3
    back = ModelProfile.from_dict(d)
    assert back.kinds["block"].group_timings == with_cp.kinds["block"].group_timings
    g2 = back.kinds["block"].group_timing(2, world=2, cp=2)
    assert g2.cp == 2 and g2.forward_s == pytest.approx(0.8 * back.kinds["block"].group_timing(2, world=2).forward_s)
    assert back.kinds["block"].group_timing(1, world=2, cp=4) is None
    # a profile without cp figures (as written before cp was measured) loads and is written back as it was
    d_old = json.loads(json.dumps(old.to_dict()))
    assert all("cp" not in g for k in d_old["kinds"].values() for g in k["group_timings"])
    assert ModelProfile.from_dict(d_old).to_dict() == d_old
    # a second figure of the same key is refused; cp is part of the key
    d["kinds"]["block"]["group_timings"].append(dict(d["kinds"]["block"]["group_timings"][-1]))
    from autoplan.errors import InputError
    with pytest.raises(InputError, match="second timing .* cp 2"):
        ModelProfile.from_dict(d)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_cost_model_takes_the_in_group_cp_figure_in_place_of_the_analytic_exchange(recompute):
    import random

    from autoplan.plan.plan import Layout
    from tests.planner_instances import random_cluster
    cl = random_cluster(random.Random(1), world=2)
    train = TrainingConfig(global_batch=4)
    lay = Layout(dp=1, tp=1, pp=1, cp=2, mbs=2, num_microbatches=2, recompute=recompute)
    plain, grouped = _cp_profile(False), _cp_profile(True)
    assert in_group_world(grouped, cl) == 2
    from autoplan.plan.coefficient_sources import composition_factors
    f, _ = composition_factors(grouped, 2, 2)
    block = grouped.kinds["block"]
    g, base = block.group_timing(2, world=2, cp=2), block.group_timing(2, world=2)
    blk = layer_costs(grouped, cl, lay, train)["block.0"]
    # the block's compute + exchange is the measured cp figure: compute = its share of the cp = 1 time, the rest cp_comm
    share = (base.forward_s + base.backward_s) / 2
    assert blk.compute_s == pytest.approx(share * f)
    assert blk.cp_comm_s == pytest.approx(g.forward_s + g.backward_s - share)
    assert blk.recompute_s == pytest.approx(g.forward_s * f if recompute == "full" else 0.0)
    # without the cp figure: half the cp = 1 figure plus the analytic all-gather/reduce-scatter
    old = layer_costs(plain, cl, lay, train)["block.0"]
    assert old.compute_s == pytest.approx(share * f)
    assert 0 < old.cp_comm_s != pytest.approx(blk.cp_comm_s)
    # the embedding and head have no cp figure: unchanged; another cp or world: the analytic path
    assert layer_costs(grouped, cl, lay, train)["head"] == layer_costs(plain, cl, lay, train)["head"]
    cl4 = random_cluster(random.Random(1), world=4)
    lay4 = Layout(dp=1, tp=1, pp=1, cp=4, mbs=2, num_microbatches=2, recompute=recompute)
    assert in_group_world(grouped, cl4) is None
    assert layer_costs(grouped, cl4, lay4, train) == layer_costs(plain, cl4, lay4, train)


@pytest.mark.parametrize("sp", [0, 1])
def test_cost_model_takes_the_in_group_cp_with_tp_figure(sp):
    """cp 2 x tp 2 on 4 processes: the block measured under both (at the layout's sp) in place of
    TP's in-group figure over cp plus the analytic exchange: compute is the cp = 1, tp = 1 time over
    4, tp_comm what TP adds at cp = 1 over cp, cp_comm the rest of the measured time."""
    import random

    from autoplan.plan.coefficient_sources import composition_factors
    from autoplan.plan.plan import Layout
    from tests.planner_instances import random_cluster
    cl = random_cluster(random.Random(1), world=4)
    train = TrainingConfig(global_batch=4)
    lay = Layout(dp=1, tp=2, pp=1, cp=2, mbs=2, num_microbatches=2, sp=sp)
    plain, grouped = _cp_profile(False, world=4), _cp_profile(True, world=4)
    f, _ = composition_factors(grouped, 4, 2)
    block = grouped.kinds["block"]
    g, base = block.group_timing(2, world=4, tp=2, sp=sp, cp=2), block.group_timing(2, world=4)
    blk = layer_costs(grouped, cl, lay, train)["block.0"]
    tp_only = block.group_timing(2, world=4, tp=2, sp=sp)
    share = (base.forward_s + base.backward_s) / 4
    tp_share = (tp_only.forward_s + tp_only.backward_s) / 2 - share
    assert blk.compute_s == pytest.approx(share * f) and tp_share > 0
    assert blk.tp_comm_s == pytest.approx(tp_share)
    assert blk.cp_comm_s == pytest.approx(g.forward_s + g.backward_s - share - tp_share) and blk.cp_comm_s > 0
    # without the figure: TP's in-group collectives over cp plus the analytic exchange
    old = layer_costs(plain, cl, lay, train)["block.0"]
    assert old.compute_s == pytest.approx(share * f) and old.tp_comm_s == pytest.approx(tp_share)
    assert old.cp_comm_s != pytest.approx(blk.cp_comm_s)


def _turn_worker(rank: int, world: int) -> list[str]:
    import torch

    from autoplan.execute.group_measure import GroupProfileConfig, _Case, time_pairs_in_turn
    calls: list[str] = []

    def case(name: str) -> _Case:
        def forward() -> str:
            calls.append(name)
            return name
        return _Case(name, "block", None, forward, lambda _: None)
    cfg = GroupProfileConfig(spec="gpt-tiny", mbs_list=(1,), warmup=1, repeats=3, max_attempts=1,
                             min_sample_s=0.0, max_inner=1)
    times = time_pairs_in_turn([case("a"), case("b")], cfg, torch.device("cpu"))
    assert len(times) == 2 and all(f >= 0 and b >= 0 for f, b in times)
    return calls


@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_whole_model_sizes_are_timed_in_turn(shared_jobs):
    # the whole model's micro-batch sizes pick a data-parallel micro-batch: their samples alternate,
    # so a machine whose speed drifts moves them together (after one warm-up call of each; one attempt:
    # a foreign load on this machine would make it measure the whole round again)
    calls = shared_jobs.get(__name__, "turn")
    assert calls[0] == ["a", "b"] + ["a", "b"] * 3 and calls[1] == calls[0]


def _order_worker(rank: int, world_size: int) -> list:
    import torch

    from autoplan.execute.group_measure import GroupProfileConfig, measure_in_groups
    cfg = GroupProfileConfig(spec="gpt-tiny", mbs_list=(1, 2), tp_list=(2,), dp_list=(), warmup=1, repeats=1,
                             min_sample_s=0.0, max_inner=1, max_attempts=1, pipelines=False)
    seen = []
    measure_in_groups(cfg, torch.device("cpu"), lambda done, total, what: seen.append((done, total, what)))
    return seen


@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_whole_model_is_timed_before_any_other_case(shared_jobs):
    # the whole model sets what a step costs at each micro-batch size; timed after the TP, FSDP and cp
    # cases the same figures stray (0.904-1.055 against 0.958-0.980 for its mbs 4 / mbs 2 ratio), so it
    # comes first, and the progress counts stay in order
    seen = shared_jobs.get(__name__, "order")[0]
    assert [w for _, _, w in seen[:2]] == ["whole model mbs=1", "whole model mbs=2"]
    assert not any(w.startswith("whole model") for _, _, w in seen[2:])
    assert [d for d, _, _ in seen] == list(range(1, len(seen) + 1)) and all(t == len(seen) for _, t, _ in seen)


def _pipeline_turn_worker(rank: int, world: int) -> list[str]:
    import torch

    from autoplan.execute.group_measure import GroupProfileConfig, _step_samples_in_turn
    calls: list[str] = []
    cfg = GroupProfileConfig(spec="gpt-tiny", mbs_list=(1,), warmup=1, repeats=3, max_attempts=1)
    rounds: list[int] = []
    got, _ = _step_samples_in_turn([lambda n=n: calls.append(n) for n in "abc"], lambda: calls.append("ref"), cfg,
                                   torch.device("cpu"), rank, rounds.append)
    assert rounds == [1, 2, 3] and [len(x) for s in got for x in s] == [3] * 9
    return [c for c in calls if c != "ref"]


@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_pipeline_runs_are_timed_in_turn(shared_jobs):
    # the fit compares the runs with each other: one step of each per round, the order rotated, so a
    # drift of the machine's speed falls on them alike (after one warm-up round)
    calls = shared_jobs.get(__name__, "pipeline_turn")
    assert calls[0] == list("abc") + list("abc") + list("bca") + list("cab") and calls[1] == calls[0]


def _pipeline_progress_worker(rank: int, world_size: int) -> list:
    import torch

    from autoplan.execute.group_measure import GroupProfileConfig, measure_in_groups
    cfg = GroupProfileConfig(spec="gpt-tiny", mbs_list=(1,), tp_list=(), dp_list=(), warmup=1, repeats=2,
                             min_sample_s=0.0, max_inner=1, max_attempts=1)
    seen = []
    out, _ = measure_in_groups(cfg, torch.device("cpu"), lambda done, total, what: seen.append((done, total, what)))
    return seen, [(t.pp, t.vp, t.schedule, t.num_microbatches, t.step_s > 0) for t in out["(pipelines)"]]


SHARED_JOBS.update({     # in the session's 2-process job (tests/conftest.py): one start-up for all four
    "turn": (2, _turn_worker, (), 60), "order": (2, _order_worker, (), 120),
    "pipeline_turn": (2, _pipeline_turn_worker, (), 60), "pipeline_progress": (2, _pipeline_progress_worker, (), 150)})


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
def test_pipelines_timed_in_turn_keep_the_progress_counts_and_the_cases(shared_jobs):
    from autoplan.execute.pipeline_profile import pipeline_cases
    seen, runs = shared_jobs.get(__name__, "pipeline_progress")[0]
    assert [d for d, _, _ in seen] == list(range(1, len(seen) + 1)) and all(t == len(seen) for _, t, _ in seen)
    assert seen[-1][2] == "pipelines in turn, round 2/2"
    assert runs == [(pp, vp, s, m, True) for pp, vp, s, m in pipeline_cases(2, 6)]     # gpt-tiny: 6 units
