"""The tied chain's per-rank relaxation (plan/tied.py) and the tied ILP built on it, against brute
force: the knapsack tables, the min-max and min-sum over ranks, the lower bound, the ILP's optimum
with its cuts, symmetry rows and incumbent cutoff (HiGHS and CBC), and per-layer recompute never
losing to uniform modes."""

from __future__ import annotations

import functools
import itertools
import math
import random

import numpy as np
import pytest

from autoplan.errors import InfeasibleError, InputError
from autoplan.plan import ilp
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.training import TrainingConfig
from autoplan.plan.graph import build_layer_graph
from autoplan.plan.ilp import resolve_solver, solve_placement, tied_chain
from autoplan.plan.plan import RECOMPUTE, Layout
from autoplan.plan.search import SearchOptions, search
from autoplan.plan.tied import best_mix_times, min_max_level, min_sum
from planner_instances import random_cluster, random_model_profile

SOLVERS = ["highs", "cbc"] if ilp.highspy is not None else ["cbc"]


@pytest.mark.parametrize("seed", range(40))
def test_best_mix_times_equals_enumeration(seed):
    rng = random.Random(seed)
    k = rng.choice([1, 2, 3, 3])
    t = np.array([rng.uniform(1, 2) for _ in range(k)])
    w = np.array([rng.uniform(0.5, 3) for _ in range(k)])
    N = rng.randint(0, 7)
    budget = rng.uniform(0, 3 * N + 1)
    got = best_mix_times(t, w, budget, N)
    for n in range(N + 1):
        best = math.inf
        for counts in itertools.product(range(n + 1), repeat=k):
            if sum(counts) == n and float(np.dot(w, counts)) <= budget:
                best = min(best, float(np.dot(t, counts)))
        assert got[n] == pytest.approx(best) if math.isfinite(best) else math.isinf(got[n])


def _random_tables(rng: random.Random, p: int, N: int, monotone: bool) -> list[np.ndarray]:
    tables = []
    for _ in range(p):
        lo = rng.randint(0, min(2, N))
        hi = rng.randint(lo, N)
        f = np.full(N + 1, math.inf)
        vals = sorted(rng.uniform(0, 5) for _ in range(hi - lo + 1)) if monotone else \
            [rng.uniform(0, 5) for _ in range(hi - lo + 1)]
        f[lo:hi + 1] = vals
        tables.append(f)
    return tables


@pytest.mark.parametrize("seed", range(40))
def test_min_max_level_and_min_sum_equal_enumeration(seed):
    rng = random.Random(seed)
    p, N = rng.randint(1, 4), rng.randint(0, 6)
    tables = _random_tables(rng, p, N, monotone=seed % 2 == 0)
    best_max = best_sum = math.inf
    for n in itertools.product(range(N + 1), repeat=p):
        if sum(n) != N:
            continue
        vals = [float(f[k]) for f, k in zip(tables, n)]
        best_max = min(best_max, max(vals))
        best_sum = min(best_sum, sum(vals))
    got_max = min_max_level(tables, N)
    if seed % 2 == 0:        # nondecreasing tables: exact
        assert got_max == pytest.approx(best_max) if math.isfinite(best_max) else math.isinf(got_max)
    else:                    # any tables: still a lower bound
        assert got_max <= best_max + 1e-12
    assert min_sum(tables, N) == pytest.approx(best_sum) if math.isfinite(best_sum) else math.isinf(min_sum(tables, N))


def _compositions(n: int, k: int):
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0,) + cuts + (n,)
        yield [bounds[i + 1] - bounds[i] for i in range(k)]


def _brute_force(profile, cluster, train, layout: Layout, modes: tuple[str, ...]) -> float:
    """Best step time over every contiguous placement and every per-block mode assignment."""
    names = profile.layer_names()
    blocks = names[1:-1]
    best = math.inf
    for sizes in _compositions(len(names), layout.pp * layout.vp):
        it = iter(names)
        stages = [[next(it) for _ in range(k)] for k in sizes]
        for assign in itertools.product(modes, repeat=len(blocks)):
            lay = layout.with_(stages=stages, recompute_layers=dict(zip(blocks, assign)))
            pred = evaluate(profile, cluster, lay, train)
            if pred.fits:
                best = min(best, pred.step_time_s)
    return best


def _instance(seed: int, interleaved: bool = False):
    """A tied chain on pp = 2..5 ranks (gpipe gives interchangeable middle ranks), with memory
    between what full recomputation and no recomputation need. ``interleaved``: vp = 2."""
    rng = random.Random(1000 + seed)
    n_blocks = rng.randint(2, 5) if not interleaved else rng.randint(3, 6)
    profile = random_model_profile(rng, n_blocks=n_blocks)
    cluster = random_cluster(rng, world=1, memory_bytes=2**40)
    train = TrainingConfig(global_batch=rng.choice([4, 8]), optimizer="sgd")
    m = train.global_batch
    if interleaved:
        pp, schedule, vp = 2, "interleaved", 2
    else:
        pp = rng.randint(2, min(5, n_blocks + 2))
        schedule, vp = rng.choice(["gpipe", "1f1b"]), 1
        if m < pp:
            schedule = "gpipe"
    layout = Layout(dp=1, tp=1, pp=pp, vp=vp, mbs=1, num_microbatches=m, schedule=schedule)
    costs = layer_costs(profile, cluster, layout, train)
    modes = {c: layer_costs(profile, cluster, layout, train, recompute=c) for c in RECOMPUTE}
    lo = _brute_force_memory(profile, cluster, train, layout, "full")
    hi = _brute_force_memory(profile, cluster, train, layout, "none")
    cluster.device.memory_bytes = int(lo + rng.uniform(0.2, 1.0) * (hi - lo))
    return profile, cluster, train, layout, costs, modes


def _brute_force_memory(profile, cluster, train, layout, mode) -> float:
    names = profile.layer_names()
    need = math.inf
    for sizes in _compositions(len(names), layout.pp * layout.vp):
        it = iter(names)
        stages = [[next(it) for _ in range(k)] for k in sizes]
        need = min(need, evaluate(profile, cluster, layout.with_(stages=stages, recompute=mode), train).peak_memory_bytes)
    return need


@functools.cache
def _brute_force_of(seed: int) -> float:
    """:func:`_brute_force` of ``_instance(seed)`` over every mode, enumerated once for both solvers."""
    profile, cluster, train, layout, _, _ = _instance(seed)
    return _brute_force(profile, cluster, train, layout, RECOMPUTE)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", range(16))
def test_tied_ilp_with_cuts_equals_brute_force(seed, solver):
    profile, cluster, train, layout, costs, modes = _instance(seed)
    expected = _brute_force_of(seed)
    graph = build_layer_graph(profile, costs)
    mem = cluster.device.memory_bytes
    chain = tied_chain(profile.layer_names(), costs, layout, mem, modes)
    res = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, time_limit_s=30)
    if math.isinf(expected):
        assert res.status == "infeasible" and math.isinf(chain.lower_bound())
        return
    assert chain.lower_bound() <= expected * (1 + 1e-7)
    assert res.status == "optimal" and res.objective == pytest.approx(expected, rel=1e-7)
    placed = layout.with_(stages=res.stages, recompute_layers=res.recompute_layers)
    again = evaluate(profile, cluster, placed, train)
    assert again.fits and again.step_time_s == pytest.approx(expected, rel=1e-7)
    # an incumbent just above the optimum changes nothing; just below, nothing beats it
    above = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, incumbent=expected * 1.001)
    assert above.status == "optimal" and above.objective == pytest.approx(expected, rel=1e-7)
    below = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, incumbent=expected * 0.999)
    assert below.status == "cutoff" and below.bound == pytest.approx(expected * 0.999)
    # the cuts are valid: the same optimum without them
    plain = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, cuts=False, time_limit_s=30)
    assert plain.objective == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", range(8))
def test_interleaved_cuts_keep_the_tied_optimum(seed, solver):
    """Interleaved: the tied ILP counts a rank's activations at an even spread over its chunks (an
    approximation that cost.evaluate checks); its cuts and cutoff must not change its optimum."""
    profile, cluster, train, layout, costs, modes = _instance(seed, interleaved=True)
    graph = build_layer_graph(profile, costs)
    mem = cluster.device.memory_bytes
    plain = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, cuts=False, time_limit_s=30)
    cut = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, time_limit_s=30)
    chain = tied_chain(profile.layer_names(), costs, layout, mem, modes)
    if plain.status == "infeasible":
        assert cut.status == "infeasible"
        return
    assert cut.status == "optimal" and cut.objective == pytest.approx(plain.objective, rel=1e-5)
    # the solvers' objectives may sit a MIP feasibility tolerance (HiGHS: 1e-6 per row) below the
    # placement's cost; the cost model's own figure for the two placements must agree
    step = [evaluate(profile, cluster, layout.with_(stages=r.stages, recompute_layers=r.recompute_layers),
                     train).step_time_s for r in (plain, cut)]
    assert step[1] == pytest.approx(step[0], rel=1e-9)
    assert chain.lower_bound() <= step[0] * (1 + 1e-7)     # the solvers' integrality tolerance
    below = solve_placement(graph, layout, mem, mode_costs=modes, solver=solver, incumbent=plain.objective * 0.999)
    assert below.status == "cutoff"


@pytest.mark.parametrize("seed", range(8))
def test_uniform_relaxation_bounds_the_uniform_optimum(seed):
    profile, cluster, train, layout, costs, _ = _instance(seed)
    for mode in RECOMPUTE:
        lay = layout.with_(recompute=mode)
        c = layer_costs(profile, cluster, lay, train)
        expected = _brute_force(profile, cluster, train, lay, (mode,))
        chain = tied_chain(profile.layer_names(), c, lay, cluster.device.memory_bytes)
        if math.isinf(expected):
            continue
        assert chain.lower_bound() <= expected * (1 + 1e-7)


def test_interchangeable_ranks_are_found():
    """GPipe holds m micro-batches on every rank: ranks 2..pp-2 are interchangeable (rank 1
    receives the first layer's output, ranks 0 and pp-1 hold the first and last layers)."""
    rng = random.Random(7)
    profile = random_model_profile(rng, n_blocks=8)
    cluster = random_cluster(rng, world=1)
    train = TrainingConfig(global_batch=8)
    for schedule, runs in (("gpipe", [[2, 3, 4]]), ("1f1b", [])):     # 1F1B: in-flight counts differ
        lay = Layout(pp=6, num_microbatches=8, schedule=schedule)
        chain = tied_chain(profile.layer_names(), layer_costs(profile, cluster, lay, train), lay, 2**40)
        assert chain.symmetric_runs() == runs


@pytest.mark.parametrize("seed", range(10))
def test_per_layer_recompute_is_never_slower_than_uniform(seed):
    rng = random.Random(2000 + seed)
    profile = random_model_profile(rng, n_blocks=rng.randint(2, 6))
    cluster = random_cluster(rng, world=rng.choice([2, 4]), memory_bytes=int(rng.uniform(10, 60) * 2**20))
    train = TrainingConfig(global_batch=8, optimizer="sgd")
    opts = SearchOptions(max_vp=2, tp_within_node=False)
    try:
        uniform = search(profile, cluster, train, opts).best[0].predicted.step_time_s
    except InfeasibleError:
        uniform = math.inf
    try:
        mixed = search(profile, cluster, train, SearchOptions(max_vp=2, tp_within_node=False, per_layer_recompute=True))
    except InfeasibleError:
        assert math.isinf(uniform)
        return
    best = mixed.best[0]
    assert best.predicted.step_time_s <= uniform * (1 + 1e-9)
    assert evaluate(profile, cluster, best.layout, train).step_time_s == pytest.approx(best.predicted.step_time_s)


def test_auto_solver_falls_back_to_cbc_without_highspy(monkeypatch):
    monkeypatch.setattr(ilp, "highspy", None)
    assert resolve_solver("auto") == "cbc"
    with pytest.raises(InputError, match="highspy"):
        resolve_solver("highs")
    profile, cluster, train, layout, costs, modes = _instance(1)
    graph = build_layer_graph(profile, costs)
    res = solve_placement(graph, layout, cluster.device.memory_bytes, mode_costs=modes)
    assert res.status in ("optimal", "infeasible")
