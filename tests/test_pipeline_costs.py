"""Pipeline costs derived from short real pipelines (profile model --nproc): the fit and its use (pure)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from autoplan.execute.pipeline_profile import balanced_chunks, even_chunks, pipeline_cases
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.pipeline_costs import (_unit_times, fit_pipeline_costs, pipeline_costs_for, pipeline_relief,
                                          predicted_step_s)
from autoplan.plan.schedules import pipeline_s, relief_at, shared_cores_pipeline_s
from autoplan.plan.plan import Layout
from autoplan.plan.training import TrainingConfig
from autoplan.profile.formats import GroupTiming, ModelProfile, PipelineCosts, PipelineTiming
from tests.planner_instances import random_cluster, random_model_profile


def grouped_profile(world: int = 4, blocks: int = 4) -> ModelProfile:
    """A synthetic profile whose layers were "measured" in groups of ``world``, twice their time alone."""
    prof = random_model_profile(random.Random(3), n_blocks=blocks)
    for kind in prof.kinds.values():
        kind.group_timings = [GroupTiming(world=world, mbs=t.mbs, forward_s=2 * t.forward_s,
                                          backward_s=2 * t.backward_s, optimizer_s=1e-4) for t in kind.timings]
    return prof


def runs_made_with(prof: ModelProfile, costs: PipelineCosts) -> list[PipelineTiming]:
    unit_s = _unit_times(prof, costs.world, costs.mbs)
    out = []
    for pp, vp, schedule, m in pipeline_cases(costs.world, len(prof.layers)):
        run = PipelineTiming(world=costs.world, pp=pp, vp=vp, schedule=schedule, num_microbatches=m, mbs=costs.mbs,
                             chunks=even_chunks(len(prof.layers), pp * vp), step_s=1.0)
        out.append(replace(run, step_s=predicted_step_s(run, unit_s, costs)))
    return out


def test_the_runs_cover_both_schedules_and_two_microbatch_counts():
    assert pipeline_cases(1, 10) == []
    assert pipeline_cases(4, 6) == [(2, 1, "1f1b", 2), (2, 1, "1f1b", 8), (2, 2, "interleaved", 2),
                                    (2, 2, "interleaved", 8), (2, 3, "interleaved", 2), (2, 3, "interleaved", 8),
                                    (4, 1, "1f1b", 4), (4, 1, "1f1b", 16)]     # and one pipeline over all 4 ranks
    assert {c[0] for c in pipeline_cases(8, 8)} == {2, 8} and {c[0] for c in pipeline_cases(8, 7)} == {2}
    assert [c[1] for c in pipeline_cases(2, 13)] == [1, 1, 2, 2, 4, 4]     # a deeper interleave beside vp = 2
    assert [c[1] for c in pipeline_cases(2, 5)] == [1, 1, 2, 2]
    assert {c[0] for c in pipeline_cases(3, 8)} == {3}          # odd worlds: one pipeline over every rank
    assert pipeline_cases(4, 3) == [(2, 1, "1f1b", 2), (2, 1, "1f1b", 8)]   # too few units to interleave or for 4 stages
    assert even_chunks(10, 4) == (2, 2, 3, 3) and sum(even_chunks(7, 3)) == 7


def test_the_runs_chunks_are_balanced_as_a_planner_balances_stages():
    # a light embedding, five blocks and a heavier head (seed 20261220's workload 5 at mbs 1): the
    # embedding joins the first blocks and the head stays with fewer, where even chunks give the last
    # stage the head and two blocks (2, 2, 3)
    unit_s = [0.08, 2.43, 2.43, 2.43, 2.43, 2.43, 3.15]
    assert even_chunks(7, 3) == (2, 2, 3)
    assert balanced_chunks(unit_s, 3) == (3, 2, 2)
    assert balanced_chunks(unit_s, 6) == (2, 1, 1, 1, 1, 1)
    assert balanced_chunks([1.0, 1.0, 1.0], 3) == (1, 1, 1) and balanced_chunks([5.0], 1) == (1,)
    # the smallest largest chunk, then the smallest sum of squares, against every split of small cases
    import itertools
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 8)
        k = rng.randint(1, n)
        w = [rng.random() for _ in range(n)]

        def score(sizes):
            b = [sum(sizes[:j]) for j in range(len(sizes) + 1)]
            c = [sum(w[x:y]) for x, y in zip(b, b[1:])]
            return round(max(c), 9), sum(x * x for x in c)
        # every split: each way to cut n units at k - 1 of the n - 1 places between them
        every = [tuple(y - x for x, y in zip((0, *cuts), (*cuts, n)))
                 for cuts in itertools.combinations(range(1, n), k - 1)]
        best = min(score(s)[0] for s in every)
        got = score(balanced_chunks(w, k))
        assert got[0] == best
        assert got[1] == pytest.approx(min(score(s)[1] for s in every if score(s)[0] == best))
    with pytest.raises(ValueError):
        balanced_chunks([1.0, 1.0], 3)


@pytest.mark.parametrize("a,av,e,c", [(2e-3, 6e-3, 0.25, 1e-3), (0.0, 0.0, 1.0, 0.0), (5e-4, 5e-4, 0.0, 4e-3)])
def test_the_fit_recovers_the_terms_the_runs_were_made_with(a, av, e, c):
    prof = grouped_profile()
    truth = PipelineCosts(world=4, mbs=1, per_chunk_s=a, per_chunk_interleaved_s=av, idle_share=e, per_step_s=c,
                          slowdown=2.0)
    prof.pipeline_timings = runs_made_with(prof, truth)
    got = fit_pipeline_costs(prof, 4)
    assert got.slowdown == pytest.approx(2.0)        # in-group over alone, from the profile
    assert got.fit_error < 1e-3
    assert got.per_chunk_s == pytest.approx(a, abs=2e-5) and got.per_step_s == pytest.approx(c, abs=2e-5)
    assert got.per_chunk_interleaved_s == pytest.approx(av, abs=2e-5)
    assert got.idle_share == pytest.approx(e)
    assert fit_pipeline_costs(prof, 2) is None        # no runs of that world


def test_each_depth_gets_its_own_costs_and_a_layout_the_nearest_measured():
    prof = grouped_profile(blocks=10)        # 12 units: 4 stages interleave at vp 2 and 3 (6 runs per depth)
    two = PipelineCosts(world=4, mbs=1, per_chunk_s=1e-3, per_chunk_interleaved_s=2e-3, idle_share=1.0, slowdown=2.0)
    four = replace(two, per_chunk_s=6e-3, idle_share=0.25, per_step_s=2e-3)
    prof.pipeline_timings = ([t for t in runs_made_with(prof, two) if t.pp == 2]
                             + [t for t in runs_made_with(prof, four) if t.pp == 4])
    assert {t.pp for t in prof.pipeline_timings} == {2, 4}
    got2, got4 = fit_pipeline_costs(prof, 4, 2), fit_pipeline_costs(prof, 4, 4)
    assert (got2.pp, got4.pp) == (2, 4) and got2.fit_error < 1e-3 and got4.fit_error < 1e-3
    assert got2.per_chunk_s == pytest.approx(1e-3, abs=2e-5) and got4.per_chunk_s == pytest.approx(6e-3, abs=2e-5)
    assert got4.per_step_s == pytest.approx(2e-3, abs=2e-5) and got4.idle_share == pytest.approx(0.25)
    assert fit_pipeline_costs(prof, 4, 3) is None                     # no 3-stage runs
    runs = prof.pipeline_timings
    prof.pipeline_timings = [t for t in runs if t.pp == 2 or t.vp == 1]
    assert fit_pipeline_costs(prof, 4, 4).idle_share == 1.0           # 2 runs, 3 unknowns: e is not fitted
    prof.pipeline_timings = runs
    assert fit_pipeline_costs(prof, 4).fit_error > 0.01               # one fit for both depths cannot explain them
    prof.pipeline_costs = [got2, got4]
    assert pipeline_costs_for(prof, 4, 4) is got4 and pipeline_costs_for(prof, 4, 2) is got2
    assert pipeline_costs_for(prof, 4, 3) is got4 and pipeline_costs_for(prof, 4, 8) is got4   # nearest by ratio
    cl = random_cluster(random.Random(1), world=4, memory_bytes=2**34)
    train = TrainingConfig(global_batch=8)
    names = prof.layer_names()
    deep = Layout(pp=4, mbs=1, num_microbatches=8, stages=[names[:3], names[3:6], names[6:9], names[9:]])
    before = evaluate(prof, cl, deep, train).step_time_s
    prof.pipeline_costs = [got2, replace(got4, per_chunk_s=2e-2)]
    assert evaluate(prof, cl, deep, train).step_time_s > before + 8 * 1e-2      # the 4-stage costs price pp = 4
    prof.pipeline_costs = [got2, replace(got4, fit_error=0.5)]
    assert pipeline_costs_for(prof, 4, 4) is got2                     # runs that contradict each other give way
    old = replace(got2, pp=0)                                         # a profile from before depths were apart
    prof.pipeline_costs = [old]
    assert pipeline_costs_for(prof, 4, 4) is old and prof.pipeline_cost(4, 2) is old


def test_profiles_keep_their_pipeline_runs_and_older_ones_load():
    prof = grouped_profile()
    prof.pipeline_timings = runs_made_with(prof, PipelineCosts(world=4, mbs=1, per_chunk_s=1e-3, idle_share=0.5))
    prof.pipeline_costs = [fit_pipeline_costs(prof, 4)]
    back = ModelProfile.from_dict(prof.to_dict())
    assert back.pipeline_timings == prof.pipeline_timings and back.pipeline_cost(4) == prof.pipeline_costs[0]
    old = prof.to_dict()
    del old["pipeline_timings"], old["pipeline_costs"]
    assert ModelProfile.from_dict(old).pipeline_cost(4) is None
    from autoplan.errors import InputError
    bad = prof.to_dict()
    bad["pipeline_timings"][0]["chunks"] = [1, 2, 3]
    with pytest.raises(InputError, match=r"pipeline_timings\[0\]: 3 chunks listed but pp\*vp = 2"):
        ModelProfile.from_dict(bad)


def test_costs_an_older_fit_derived_are_fitted_again_from_the_runs():
    prof = grouped_profile()
    prof.pipeline_timings = runs_made_with(prof, PipelineCosts(world=4, mbs=1, per_chunk_s=1e-3, idle_share=0.5))
    prof.pipeline_costs = [fit_pipeline_costs(prof, 4)]
    assert prof.pipeline_costs[0].relief_model == "shared_cores"
    old = prof.to_dict()
    for c in old["pipeline_costs"]:               # as a profile made before 2026-12-06 holds them
        del c["relief_model"]
        c["idle_share"], c["per_chunk_s"] = 0.1, 0.5
    back = ModelProfile.from_dict(old)
    assert back.pipeline_costs[0].relief_model == "step_average"
    assert pipeline_costs_for(back, 4, 2) == prof.pipeline_costs[0]           # fitted again, not read
    bad = prof.to_dict()
    bad["pipeline_costs"][0]["relief_model"] = "magic"
    from autoplan.errors import InputError
    with pytest.raises(InputError, match=r"pipeline_costs\[0\]\.relief_model must be one of shared_cores\|step_average"):
        ModelProfile.from_dict(bad)


def test_the_cost_model_adds_the_measured_terms_to_every_chunk():
    prof = grouped_profile(blocks=6)
    cl = random_cluster(random.Random(1), world=4, memory_bytes=2**34)
    train = TrainingConfig(global_batch=8)
    names = prof.layer_names()
    lay = Layout(dp=2, pp=2, mbs=1, num_microbatches=4, stages=[names[:4], names[4:]])

    def step(a: float, c: float) -> tuple[float, dict]:
        prof.pipeline_costs = [PipelineCosts(world=4, mbs=1, per_chunk_s=a, idle_share=0.0, per_step_s=c)]
        p = evaluate(prof, cl, lay, train)
        return p.step_time_s, p.breakdown_s
    base, _ = step(0.0, 0.0)
    cut = names[3]
    assert layer_costs(prof, cl, lay, train)[cut].p2p_s == 0.0   # the runs' messages replace the cluster's fit
    t, b = step(1e-3, 5e-3)
    assert b["pp_p2p"] == pytest.approx(4 * 1e-3)
    # 1F1B: every rank's tau grows by a: (m - 1) a in the steady state, pp a in the fill and drain
    assert t - base == pytest.approx((4 - 1 + 2) * 1e-3 + 5e-3)
    prof.pipeline_costs = []
    assert layer_costs(prof, cl, lay, train)[cut].p2p_s > 0              # without runs: the cluster's fit


def test_ranks_share_the_cores_moment_by_moment():
    # 2 stages, 2 micro-batches, GPipe, every forward and backward 1 s with every process busy, the
    # cores giving 2 / 1.5 ranks' worth of speed alone (an operation alone takes 1 / 1.5 s):
    # F(0,0) alone 2/3 s; F(0,1) beside F(1,0) 1 s; F(1,1) alone 2/3 s while rank 0 waits for B(1,0);
    # B(1,0) alone 2/3 s; B(0,0) beside B(1,1) 1 s; B(0,1) alone 2/3 s: 14/3 s
    got = shared_cores_pipeline_s([1.0, 1.0], [1.0, 1.0], pp=2, vp=1, m=2, schedule="gpipe", slowdown=1.5,
                                  idle_share=1.0)
    assert got == pytest.approx(14 / 3)
    lay = Layout(pp=2, mbs=1, num_microbatches=2, schedule="gpipe")
    whole = pipeline_s([2.0, 2.0], [2.0, 2.0], lay)                   # 6 s with every process busy all along
    # the step's average (relief_at) is 2/3; at each moment only as fast as the ranks that run
    assert relief_at(1.5, [4.0, 4.0], whole) == pytest.approx(2 / 3)
    costs = PipelineCosts(world=2, mbs=1, per_chunk_s=0.0, idle_share=1.0, slowdown=1.5)
    assert pipeline_relief(costs, [1.0, 1.0], [1.0, 1.0], lay, whole) == pytest.approx(14 / 18)
    # a waiting rank that keeps its core (e = 0) lends nothing; one that gives half of it lends less
    assert pipeline_relief(replace(costs, idle_share=0.0), [1.0, 1.0], [1.0, 1.0], lay, whole) == pytest.approx(1.0)
    half = pipeline_relief(replace(costs, idle_share=0.5), [1.0, 1.0], [1.0, 1.0], lay, whole)
    assert 14 / 18 < half < 1.0
    # one rank at a time (m = 1) runs alone all along: 1/s, never faster
    one = Layout(pp=2, mbs=1, num_microbatches=1, schedule="1f1b")
    assert pipeline_relief(replace(costs, slowdown=2.0), [1.0, 1.0], [2.0, 2.0], one,
                           pipeline_s([3.0, 3.0], [3.0, 3.0], one)) == pytest.approx(0.5)
    assert pipeline_relief(replace(costs, slowdown=1.0), [1.0, 1.0], [1.0, 1.0], lay, whole) == 1.0   # no sharing


def test_the_runs_are_fitted_as_measured_whatever_the_references_beside_them_say():
    prof = grouped_profile()
    def parts(mbs: int, attr: str) -> float:
        return sum(getattr(prof.kinds[i.kind].group_timing(mbs, world=4), attr) for i in prof.layers)
    prof.whole_model_timings = [GroupTiming(world=4, mbs=m, forward_s=parts(m, "forward_s"),
                                            backward_s=parts(m, "backward_s")) for m in (1, 2, 4)]
    truth = PipelineCosts(world=4, mbs=1, per_chunk_s=1e-3, per_chunk_interleaved_s=3e-3, idle_share=0.5,
                          slowdown=1.5)
    whole = prof.whole_model_timing(1, 4)
    ref = whole.forward_s + whole.backward_s
    # references beside the runs twice (and scattered around twice) the whole model's time, as after the
    # profile's TP, FSDP and cp cases: the steps themselves are what the fit explains, not rescaled
    scatter = [1.6, 2.0, 2.4, 2.0]
    prof.pipeline_timings = [replace(t, reference_s=k * ref, lone_reference_s=k * ref / 1.5)
                             for t, k in zip(runs_made_with(prof, truth), scatter * 4)]
    got = fit_pipeline_costs(prof, 4)
    assert got.slowdown == pytest.approx(1.5) and got.fit_error < 1e-3
    assert got.per_chunk_s == pytest.approx(1e-3, abs=2e-5)
    assert got.per_chunk_interleaved_s == pytest.approx(3e-3, abs=2e-5)


def test_a_fit_that_does_not_explain_its_runs_is_not_used():
    prof = grouped_profile(blocks=6)
    cl = random_cluster(random.Random(1), world=4, memory_bytes=2**34)
    names = prof.layer_names()
    lay = Layout(dp=2, pp=2, mbs=1, num_microbatches=4, stages=[names[:4], names[4:]])
    train = TrainingConfig(global_batch=8)
    without = evaluate(prof, cl, lay, train).step_time_s
    prof.pipeline_costs = [PipelineCosts(world=4, mbs=1, per_chunk_s=1e-2, idle_share=0.0, fit_error=0.9)]
    assert evaluate(prof, cl, lay, train).step_time_s == without


@pytest.mark.parametrize("schedule,vp", [("1f1b", 1), ("interleaved", 2)])
def test_the_cost_model_costs_the_measured_runs_as_their_fit_does(schedule, vp):
    """The cost model's pipeline (compute, messages, bubble, per-step work, relief) is the fit's: a
    measured run, costed as a layout, comes out as :func:`predicted_step_s` said. The relief takes the
    slowdown the runs measured (a rank computing alone while the others wait), not the cluster's
    (every process computing at once): on 2 processes on 2 cores the cluster showed 1.17 and the runs
    1.04, and the cluster's figure took 11-18% off the compute of every pipeline."""
    prof = grouped_profile(world=4, blocks=6)
    costs = PipelineCosts(world=4, mbs=1, per_chunk_s=1e-3, per_chunk_interleaved_s=2e-3, idle_share=0.5,
                          per_step_s=2e-3, slowdown=1.3)
    prof.pipeline_costs = [costs]
    cl = random_cluster(random.Random(1), world=4, memory_bytes=2**34)
    cl.device.concurrent_compute_flops_per_s = cl.device.compute_flops_per_s / 2.5      # the cluster: 2.5
    names = prof.layer_names()
    chunks = even_chunks(len(names), 2 * vp)
    bounds = [sum(chunks[:j]) for j in range(len(chunks) + 1)]
    stages = [names[a:b] for a, b in zip(bounds, bounds[1:])]
    # m = pp: the ranks are busy for a share u of the step below 1 / 1.3, where the two reliefs differ
    run = PipelineTiming(world=4, pp=2, vp=vp, schedule=schedule, num_microbatches=2, mbs=1, chunks=chunks,
                         step_s=1.0)
    lay = Layout(dp=2, pp=2, vp=vp, mbs=1, num_microbatches=2, schedule=schedule, stages=stages)
    p = evaluate(prof, cl, lay, TrainingConfig(global_batch=4))
    pipeline = sum(v for k, v in p.breakdown_s.items() if k not in ("dp_sync", "optimizer"))
    assert pipeline == pytest.approx(predicted_step_s(run, _unit_times(prof, 4, 1), costs), rel=1e-9)


def test_a_depth_whose_runs_contradict_each_other_is_named_and_gives_way(capsys):
    from autoplan.execute.group_profile import add_group_timings
    from autoplan.execute.pipeline_profile import PIPELINES
    prof = grouped_profile(blocks=6)
    runs = runs_made_with(prof, PipelineCosts(world=4, mbs=1, per_chunk_s=1e-3, idle_share=1.0, slowdown=2.0))
    # the 4-stage run with few micro-batches took as long as the one with four times as many
    many = max(t.step_s for t in runs if t.pp == 4)
    runs = [replace(t, step_s=many) if t.pp == 4 and t.num_microbatches == 4 else t for t in runs]
    add_group_timings(prof, {PIPELINES: runs})
    err = capsys.readouterr().err
    assert "warning: the 4-stage pipelines measured on 4 processes contradict each other" in err
    assert "2-stage" not in err and err.count("\n") == 1
    assert [c.pp for c in prof.pipeline_costs] == [2, 4]
    assert pipeline_costs_for(prof, 4, 4).pp == 2                     # the 2-stage runs cost a 4-stage layout


def test_pure_data_parallel_pays_what_ddp_added_to_the_whole_model_in_groups():
    # the whole model timed in groups of 4, plain and under DDP over the 4 processes: DDP's step
    # 30 ms above the plain one at mbs 1, 50 ms at mbs 2 (one figure for every size: their median)
    prof = grouped_profile(blocks=6)
    cl = random_cluster(random.Random(1), world=4, memory_bytes=2**34)
    train = TrainingConfig(global_batch=8)
    names = prof.layer_names()

    def parts(mbs: int, attr: str) -> float:
        return sum(getattr(prof.kinds[i.kind].group_timing(mbs, world=4), attr) for i in prof.layers)
    plain = [GroupTiming(world=4, mbs=m, forward_s=parts(m, "forward_s"), backward_s=parts(m, "backward_s"))
             for m in (1, 2)]
    dp4 = Layout(dp=4, mbs=2, num_microbatches=1, stages=[names])
    prof.whole_model_timings = plain
    before = evaluate(prof, cl, dp4, train)            # no DDP figures: the cluster's all-reduce fit
    prof.whole_model_timings = [replace(g, backward_sync_s=g.backward_s + extra)
                                for g, extra in zip(plain, (0.03, 0.05))]
    got = evaluate(prof, cl, dp4, train)
    assert got.breakdown_s["dp_sync"] == pytest.approx(0.04)
    assert got.step_time_s - got.breakdown_s["dp_sync"] == pytest.approx(before.step_time_s - before.breakdown_s["dp_sync"])
    accumulating = Layout(dp=4, mbs=1, num_microbatches=2, stages=[names])     # one all-reduce per step
    assert evaluate(prof, cl, accumulating, train).breakdown_s["dp_sync"] == pytest.approx(0.04)
    # data parallel over part of the world (beside a pipeline) keeps the cluster's fit
    hybrid = Layout(dp=2, pp=2, mbs=1, num_microbatches=4, stages=[names[:4], names[4:]])
    prof.whole_model_timings = plain
    fit = evaluate(prof, cl, hybrid, train).breakdown_s["dp_sync"]
    prof.whole_model_timings = [replace(g, backward_sync_s=g.backward_s + 0.03) for g in plain]
    assert evaluate(prof, cl, hybrid, train).breakdown_s["dp_sync"] == pytest.approx(fit)
