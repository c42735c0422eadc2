"""The planner rediscovers what practitioners know, on catalogue hardware (no devices needed)."""

from __future__ import annotations

import copy

import pytest

from autoplan.errors import InfeasibleError
from autoplan.plan.api import complete_layout, estimate_problem, make_problem, solve_problem
from autoplan.plan.groups import spans_nodes
from autoplan.plan.layout_input import parse_layout_constraints
from autoplan.plan.search import SearchOptions


def solve(pb, layout: str = "", **kw):
    return solve_problem(pb, SearchOptions(fixed=parse_layout_constraints(layout), **kw), families=False)


def test_plenty_of_memory_gives_pure_data_parallel():
    pb = make_problem("gpt3-1.3b", "dgx-a100-80gb:1", 512)
    lay = solve(pb).layout
    assert (lay.dp, lay.tp, lay.pp) == (8, 1, 1)


def test_model_that_does_not_fit_one_device_gets_sharded():
    pb = make_problem("gpt3-13b", "dgx-a100-80gb:1", 64)      # 13e9 params * 16 bytes > 80 GB
    with pytest.raises(InfeasibleError, match="no layout with pp=1, tp=1, zero=0 fits"):
        solve(pb, "tp=1,pp=1,zero=0")
    lay = solve(pb).layout
    assert lay.zero >= 1 or lay.tp > 1 or lay.pp > 1


def _two_nodes_of_four(inter_like_intra: bool):
    pb = make_problem("gpt3-6.7b", "dgx-a100-80gb:1", 64)
    cl = copy.deepcopy(pb.cluster)
    cl.num_nodes, cl.devices_per_node = 2, 4
    cl.links["inter_node"] = copy.deepcopy(make_problem("gpt3-6.7b", "dgx-a100-80gb:2", 64).cluster.links["inter_node"])
    if inter_like_intra:
        cl.links["inter_node"] = copy.deepcopy(cl.links["intra_node"])
    else:   # a 100x slower network between the nodes
        for fits in cl.links["inter_node"].values():
            for f in fits.values():
                f.bandwidth_bytes_per_s /= 100
    pb.cluster = cl
    return pb


def test_slow_link_between_nodes_keeps_tensor_parallel_inside_a_node():
    pb = _two_nodes_of_four(inter_like_intra=False)
    plan = solve(pb, "dp=1", tp_within_node=False)          # TP may span nodes if it wants to
    tp_spans, _, _ = spans_nodes(plan.layout.dp, plan.layout.tp, plan.layout.pp, 4, 2)
    assert not tp_spans, plan.layout.short()
    # and TP over both nodes is predicted slower because of its collectives
    _, spanning = estimate_problem(pb, complete_layout({"dp": 1, "tp": 8, "pp": 1, "sp": 1}, 8, 64))
    assert spanning.breakdown_s["tp_comm"] > plan.predicted.breakdown_s["tp_comm"]
    assert spanning.step_time_s > plan.predicted.step_time_s


def test_fast_link_lets_tensor_parallel_span_nodes():
    fast = solve(_two_nodes_of_four(inter_like_intra=True), "dp=1,pp=1,cp=1", tp_within_node=False)
    assert fast.layout.tp == 8          # one flat NVLink-like fabric: TP over all 8 is fine


def test_small_batch_per_replica_makes_deep_pipelines_lose_to_their_bubble():
    pb_small = make_problem("gpt3-6.7b", "dgx-a100-80gb:1", 1)
    pb_large = make_problem("gpt3-6.7b", "dgx-a100-80gb:1", 512)
    small, large = solve(pb_small, "dp=1,cp=1"), solve(pb_large, "dp=1,cp=1")
    assert small.layout.pp == 1 and large.layout.pp > 1
    # the deep pipeline at batch 1 is predicted slower, and the bubble is why
    _, deep = estimate_problem(pb_small, complete_layout({"dp": 1, "tp": 1, "pp": 8}, 8, 1))
    assert deep.step_time_s > small.predicted.step_time_s
    assert deep.breakdown_s["bubble"] == max(deep.breakdown_s.values())


@pytest.mark.parametrize("model,cluster,batch", [("gpt3-1.3b", "dgx-a100-80gb:1", 64),
                                                 ("gpt3-13b", "dgx-h100-80gb:2", 128)])
def test_estimate_and_solve_agree(model, cluster, batch):
    pb = make_problem(model, cluster, batch)
    plan = solve(pb)
    # estimate of the chosen layout (with its stages) gives the same prediction
    lay, pred = estimate_problem(pb, plan.layout)
    assert pred.step_time_s == pytest.approx(plan.predicted.step_time_s, rel=1e-12)
    assert pred.peak_memory_bytes == plan.predicted.peak_memory_bytes
    # solve --layout fixing every field but the stages gives the same time as estimate without stages
    fields = {k: v for k, v in plan.layout.to_dict().items() if k not in ("stages", "recompute_layers")}
    fixed = solve(pb, ",".join(f"{k}={v}" for k, v in fields.items()))
    _, pred2 = estimate_problem(pb, complete_layout(fields, pb.cluster.world_size, batch))
    assert fixed.predicted.step_time_s == pytest.approx(pred2.step_time_s, rel=1e-12)
    assert fixed.predicted.step_time_s == pytest.approx(plan.predicted.step_time_s, rel=1e-12)


def test_presets_are_constraints_on_the_same_planner():
    from autoplan.plan.presets import preset_constraints
    pb = make_problem("gpt3-13b", "dgx-a100-80gb:4", 256)
    free = solve(pb)
    for name, check in [("zero3", lambda l: (l.tp, l.pp, l.zero) == (1, 1, 3)),
                        ("ddp", None),
                        ("megatron", lambda l: l.tp == 8 and l.sp == 1)]:
        fixed = preset_constraints(name, pb.profile, pb.cluster)
        if check is None:   # 13B does not fit unsharded: the preset is infeasible, and says so
            with pytest.raises(InfeasibleError):
                solve_problem(pb, SearchOptions(fixed=fixed), families=False)
            continue
        plan = solve_problem(pb, SearchOptions(fixed=fixed), families=False)
        assert check(plan.layout), plan.layout.short()
        assert plan.predicted.step_time_s >= free.predicted.step_time_s * (1 - 1e-12)
