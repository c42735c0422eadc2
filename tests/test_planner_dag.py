"""The placement ILP on a layer graph that is not a chain (encoder-decoder with cross edges and a
skip connection): it respects every edge and pays for every edge a cut crosses, and its optimum
equals brute force over every edge-respecting placement."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from autoplan.plan.coefficients import layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.memory import boundary_crossings
from autoplan.plan.training import TrainingConfig
from autoplan.plan.graph import build_layer_graph, is_chain
from autoplan.plan.plan import Layout
from autoplan.plan.search import SearchOptions, search
from autoplan.profile.formats import LayerInfo, ModelProfile
from autoplan.plan import ilp
from planner_instances import random_cluster, random_model_profile


def encoder_decoder_profile(rng: random.Random) -> ModelProfile:
    """enc.embed -> enc.0 -> enc.1 ; dec.embed -> dec.0 -> dec.1 -> head ; enc.1 -> dec.0, dec.1
    (cross-attention reads the encoder output) ; enc.0 -> head (a long skip)."""
    base = random_model_profile(rng, n_blocks=1)
    kinds = {"embed": base.kinds["embed"], "block": base.kinds["block"], "head": base.kinds["head"]}
    names = [("enc.embed", "embed"), ("enc.0", "block"), ("enc.1", "block"), ("dec.embed", "embed"),
             ("dec.0", "block"), ("dec.1", "block"), ("head", "head")]
    edges = [("enc.embed", "enc.0"), ("enc.0", "enc.1"), ("dec.embed", "dec.0"), ("dec.0", "dec.1"),
             ("dec.1", "head"), ("enc.1", "dec.0"), ("enc.1", "dec.1"), ("enc.0", "head")]
    return ModelProfile(model_spec="enc-dec", shape=base.shape, precision="fp32", seq_len=16,
                        layers=[LayerInfo(n, k) for n, k in names], edges=edges, kinds=kinds,
                        optimizer_step_s_per_param=base.optimizer_step_s_per_param)


def brute_force(profile, cluster, train, layout: Layout) -> float:
    names = profile.layer_names()
    S = layout.pp * layout.vp
    best = math.inf
    for assign in itertools.product(range(S), repeat=len(names)):
        where = dict(zip(names, assign))
        if len(set(assign)) != S or any(where[u] > where[v] for u, v in profile.edges):
            continue
        stages = [[n for n in names if where[n] == j] for j in range(S)]
        pred = evaluate(profile, cluster, layout.with_(stages=stages), train)
        if pred.fits:
            best = min(best, pred.step_time_s)
    return best


def test_graph_is_not_a_chain():
    prof = encoder_decoder_profile(random.Random(0))
    assert not is_chain(build_layer_graph(prof))


@pytest.mark.parametrize("solver", ["highs", "cbc"] if ilp.highspy is not None else ["cbc"])
@pytest.mark.parametrize("seed", range(6))
def test_dag_placement_equals_brute_force(seed, solver):
    rng = random.Random(seed)
    prof = encoder_decoder_profile(rng)
    cluster = random_cluster(rng, world=4, memory_bytes=int(rng.uniform(30, 200) * 2**20))
    train = TrainingConfig(global_batch=8)
    for pp, vp, sched in ((2, 1, "1f1b"), (4, 1, "1f1b"), (2, 2, "interleaved")):
        fixed = dict(dp=4 // pp, tp=1, pp=pp, vp=vp, mbs=1, schedule=sched, zero=0, recompute="none")
        lay = Layout(num_microbatches=8 // (4 // pp), **fixed)
        expected = brute_force(prof, cluster, train, lay)
        if math.isinf(expected):
            continue
        got = search(prof, cluster, train, SearchOptions(fixed=fixed, solver=solver)).best[0]
        assert got.predicted.step_time_s == pytest.approx(expected, rel=1e-7)
        where = {n: j for j, st in enumerate(got.layout.stages) for n in st}
        assert all(where[u] <= where[v] for u, v in prof.edges)


def test_every_cut_edge_pays_its_send():
    """The long skip enc.0 -> head crosses every boundary of this placement; each crossing is a send."""
    rng = random.Random(1)
    prof = encoder_decoder_profile(rng)
    cluster = random_cluster(rng, world=4, memory_bytes=2**34)
    train = TrainingConfig(global_batch=8)
    a = [["enc.embed", "enc.0"], ["enc.1", "dec.embed"], ["dec.0"], ["dec.1", "head"]]
    cross = boundary_crossings(prof.edges, a)
    assert [len(c) for c in cross] == [2, 4, 3]
    assert all(("enc.0", "head") in c for c in cross)
    # moving the skip's endpoints together removes its sends: same layers per stage otherwise
    lay = Layout(dp=1, pp=4, mbs=1, num_microbatches=8, stages=a)
    costs = layer_costs(prof, cluster, lay, train)
    pa = evaluate(prof, cluster, lay, train, costs)
    p2p_rank0 = sum(costs[u].p2p_s for u, _ in cross[0])
    assert pa.breakdown_s["pp_p2p"] + pa.breakdown_s["bubble"] >= p2p_rank0
