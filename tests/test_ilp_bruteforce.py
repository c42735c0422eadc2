"""The placement ILP + outer search must find exactly the best layout that brute force finds by
evaluating every layout and every contiguous placement with the same cost model."""

from __future__ import annotations

import functools
import itertools
import math
import random

import pytest

from autoplan.errors import InfeasibleError
from autoplan.plan.cost import evaluate
from autoplan.plan.training import TrainingConfig
from autoplan.plan.plan import RECOMPUTE, Layout
from autoplan.plan.search import SearchOptions, search
from autoplan.plan import ilp
from planner_instances import random_cluster, random_model_profile

SOLVERS = ["highs", "cbc"] if ilp.highspy is not None else ["cbc"]


def compositions(n: int, k: int):
    """All ways to cut a sequence of n items into k non-empty contiguous parts (part sizes)."""
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0,) + cuts + (n,)
        yield [bounds[i + 1] - bounds[i] for i in range(k)]


def brute_force(profile, cluster, train, max_vp: int):
    names = profile.layer_names()
    L, world = len(names), cluster.world_size
    heads = profile.shape["heads"]
    best = math.inf
    from autoplan.plan.search import SearchOptions, cp_degrees_searched
    cps = cp_degrees_searched(SearchOptions(), profile.seq_len)
    for dp, tp, cp in itertools.product(range(1, world + 1), range(1, world + 1), cps):
        if world % (dp * tp * cp) or (cp > 1 and profile.seq_len % (2 * cp)):
            continue
        pp = world // (dp * tp * cp)
        if heads % tp or pp > L or train.global_batch % dp:
            continue
        per = train.global_batch // dp
        for mbs in [b for b in range(1, per + 1) if per % b == 0]:
            m = per // mbs
            scheds = [("1f1b", 1)] if pp == 1 else [("gpipe", 1)] + ([("1f1b", 1)] if m >= pp else [])
            if pp > 1 and m >= pp and m % max(1, m // pp) == 0:
                scheds += [("interleaved", v) for v in range(2, max_vp + 1) if pp * v <= L]
            for (sched, vp), zero, rec, sp in itertools.product(
                    scheds, range(4) if dp * cp > 1 else [0], RECOMPUTE, [0, 1] if tp > 1 else [0]):
                for sizes in compositions(L, pp * vp):
                    it = iter(names)
                    stages = [[next(it) for _ in range(s)] for s in sizes]
                    lay = Layout(dp=dp, tp=tp, pp=pp, cp=cp, vp=vp, mbs=mbs, num_microbatches=m, zero=zero,
                                 recompute=rec, schedule=sched, sp=sp, stages=stages)
                    pred = evaluate(profile, cluster, lay, train)
                    if pred.fits:
                        best = min(best, pred.step_time_s)
    return best


def search_instance(seed: int):
    """(model profile, cluster, training) of ``seed``: the same objects' values on every call."""
    rng = random.Random(seed)
    profile = random_model_profile(rng, n_blocks=rng.randint(1, 5), distinct_blocks=seed % 2 == 0)
    world = rng.choice([1, 2, 4, 4, 8]) if seed % 3 else 4
    cluster = random_cluster(rng, world=world, memory_bytes=int(rng.uniform(15, 120) * 2**20),
                             num_nodes=2 if world >= 4 and seed % 4 == 1 else 1)
    train = TrainingConfig(global_batch=rng.choice([4, 8, 16]), optimizer=rng.choice(["adamw", "sgd"]))
    return profile, cluster, train


@functools.cache
def brute_force_of(seed: int) -> float:
    """:func:`brute_force` of :func:`search_instance` ``(seed)``, enumerated once for the formulations
    and solvers compared with it (the enumeration is most of these tests' time)."""
    return brute_force(*search_instance(seed), max_vp=2)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("formulation", ["auto", "cuts", "assignment"])
@pytest.mark.parametrize("seed", range(24))
def test_search_equals_brute_force(seed, formulation, solver):
    profile, cluster, train = search_instance(seed)
    expected = brute_force_of(seed)
    opts = SearchOptions(max_vp=2, tp_within_node=False, formulation=formulation, solver=solver)
    if math.isinf(expected):
        with pytest.raises(InfeasibleError):
            search(profile, cluster, train, opts)
        return
    got = search(profile, cluster, train, opts)
    assert got.solver.status == "optimal"
    assert got.best[0].predicted.step_time_s == pytest.approx(expected, rel=1e-7)
    # the returned layout really has the predicted cost
    again = evaluate(profile, cluster, got.best[0].layout, train)
    assert again.step_time_s == pytest.approx(expected, rel=1e-7) and again.fits


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", range(12))
def test_per_layer_recompute_equals_brute_force(seed, solver):
    """Memory just below what no recomputation needs: the ILP choosing each block's mode per rank
    finds the best over every placement and every assignment of modes to blocks."""
    rng = random.Random(100 + seed)
    profile = random_model_profile(rng, n_blocks=rng.randint(2, 4))
    cluster = random_cluster(rng, world=2, memory_bytes=2**40)
    train = TrainingConfig(global_batch=4, optimizer="sgd")
    names = profile.layer_names()
    blocks = names[1:-1]

    def layouts(modes_list):
        for pp, s in ((1, "1f1b"), (2, "gpipe"), (2, "1f1b")):
            for sizes in compositions(len(names), pp):
                it = iter(names)
                stages = [[next(it) for _ in range(k)] for k in sizes]
                for modes in modes_list:
                    yield Layout(dp=1, tp=1, pp=pp, mbs=1, num_microbatches=4, schedule=s, stages=stages,
                                 recompute_layers=dict(zip(blocks, modes)))

    none_need = min(evaluate(profile, cluster, lay, train).peak_memory_bytes
                    for lay in layouts([("none",) * len(blocks)]))
    cluster.device.memory_bytes = int(none_need * rng.uniform(0.8, 0.99))
    best = math.inf
    for lay in layouts(list(itertools.product(RECOMPUTE, repeat=len(blocks)))):
        pred = evaluate(profile, cluster, lay, train)
        if pred.fits:
            best = min(best, pred.step_time_s)
    opts = SearchOptions(fixed={"dp": 1, "tp": 1, "mbs": 1, "sp": 0}, per_layer_recompute=True,
                         mixed_recompute_time_limit_s=30, prune_dominated=False, schedules=("gpipe", "1f1b"),
                         solver=solver)
    if math.isinf(best):
        with pytest.raises(InfeasibleError):
            search(profile, cluster, train, opts)
        return
    got = search(profile, cluster, train, opts).best[0]
    assert got.predicted.step_time_s == pytest.approx(best, rel=1e-7)
    again = evaluate(profile, cluster, got.layout, train)
    assert again.fits and again.step_time_s == pytest.approx(best, rel=1e-7)
