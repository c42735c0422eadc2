"""The cost model's pipeline schedule facts, checked against torch's own schedules."""

from types import SimpleNamespace

import pytest

from autoplan.plan.schedules import (inflight_microbatches, inflight_vectors, interleaved_order, peak_activation_bytes,
                                     schedule_order, schedule_rule_violation)
from autoplan.plan.plan import Layout


def _torch_order(pp: int, vp: int, m: int, rank: int) -> list[tuple[str, int]]:
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, _ComputationType
    rounds = max(1, m // pp)
    me = SimpleNamespace(n_local_stages=vp, microbatches_per_round=m // rounds, pp_group_size=pp, _n_microbatches=m)
    ops = ScheduleInterleaved1F1B._calculate_single_rank_operations(me, rank)
    kind = {_ComputationType.FORWARD: "F", _ComputationType.FULL_BACKWARD: "B"}
    return [(kind[a.computation_type], a.stage_index // pp) for a in ops if a is not None]


@pytest.mark.parametrize("pp,vp,m", [(2, 2, 2), (2, 2, 4), (4, 2, 8), (4, 2, 4), (4, 3, 8), (4, 2, 12),
                                     (8, 6, 16), (3, 2, 6), (4, 4, 10), (2, 3, 7)])
def test_interleaved_order_is_torchs(pp, vp, m):
    rounds = max(1, m // pp)
    if m % rounds:
        pytest.skip("torch refuses this micro-batch count")
    for rank in range(pp):
        assert interleaved_order(pp, vp, m, rank) == _torch_order(pp, vp, m, rank)


def test_inflight_vectors():
    assert inflight_vectors("1f1b", 4, 1, 8, 0) == ((4,),)
    assert inflight_vectors("1f1b", 4, 1, 8, 3) == ((1,),)
    assert inflight_vectors("1f1b", 4, 1, 2, 0) == ((2,),)
    assert inflight_vectors("gpipe", 4, 1, 8, 2) == ((8,),)
    # pp=4, vp=2, m=8, rank 1: its first chunk holds all 8 micro-batches while the second drains
    vecs = inflight_vectors("interleaved", 4, 2, 8, 1)
    assert (8, 1) in vecs and all(sum(v) <= 9 for v in vecs)
    lay = Layout(pp=4, vp=2, num_microbatches=8, schedule="interleaved")
    # an even spread: the largest total over vp, as before (torch's warm-up + 1 chunk forwards)
    assert inflight_microbatches(lay, 1) == pytest.approx(9 / 2)
    # uneven chunks: two blocks on the first chunk, one on the second (what a planner once chose)
    assert peak_activation_bytes(lay, 1, [2.0, 1.0]) == pytest.approx(8 * 2 + 1)
    assert peak_activation_bytes(lay, 1, [1.0, 2.0]) <= 9 / 2 * 3


@pytest.mark.parametrize("schedule,vps", [("gpipe", (1,)), ("1f1b", (1,)), ("interleaved", (2, 3))])
def test_order_and_inflight_counts_agree(schedule, vps):
    """The memory model's in-flight micro-batches are those of the order the timeline runs: one
    definition of a schedule (plan/schedules.py) behind both."""
    for pp in (2, 3, 4):
        for vp in vps:
            for m in (pp, pp + 1, 2 * pp, 8):
                if schedule_rule_violation(schedule, pp=pp, vp=vp, num_microbatches=m):
                    continue
                for rank in range(pp):
                    held, peak = [0] * vp, [0] * vp
                    for kind, chunk, _ in schedule_order(schedule, pp=pp, vp=vp, m=m, rank=rank):
                        held[chunk // pp] += 1 if kind == "F" else -1
                        peak = [max(a, b) for a, b in zip(peak, held)]
                    vecs = inflight_vectors(schedule, pp, vp, m, rank)
                    assert [max(v[i] for v in vecs) for i in range(vp)] == peak, (schedule, pp, vp, m, rank)


def test_peak_moments_gradients_from_first_backward():
    from autoplan.plan.schedules import peak_moments
    # 1F1B, pp=4: at m = pp the first rank runs every forward before a backward, so its four
    # micro-batches never meet its gradients; with a steady state (m > pp) they do
    assert peak_moments("1f1b", 4, 1, 4, 0) == (((3,), (1,)), ((4,), (0,)))
    # no pipeline: one micro-batch's forward ends before any gradient is made; a later one's meets them
    assert peak_moments("1f1b", 1, 1, 1, 0) == (((1,), (0,)),)
    assert peak_moments("1f1b", 1, 1, 4, 0) == (((1,), (1,)),)
    assert peak_moments("1f1b", 4, 1, 8, 0) == (((4,), (1,)),)
    assert peak_moments("1f1b", 4, 1, 4, 1) == (((3,), (1,)),)
    assert peak_moments("gpipe", 4, 1, 8, 2) == (((7,), (1,)), ((8,), (0,)))
    # interleaved, m = pp: rank 0's warm-up runs all 8 chunk forwards; its second chunk's backward comes first
    assert peak_moments("interleaved", 4, 2, 4, 0) == (((3, 0), (1, 1)), ((4, 3), (0, 1)), ((4, 4), (0, 0)))


@pytest.mark.parametrize("framework,first_rank_grows", [("autoplan", True), ("megatron", False)])
def test_memory_counts_gradients_only_once_made(framework, first_rank_grows):
    """1F1B on 8 pipeline ranks, m = pp and 2pp: under autoplan's executor (gradients set to None
    after each step) the first rank's peak at m = pp is the larger of pp micro-batches without its
    gradients and pp - 1 with them, so it grows by min(gradients, one micro-batch) up to m = 2pp;
    the other ranks hold the same at both. Megatron's gradient buffer exists from the start: no
    rank changes."""
    from autoplan.plan.api import estimate_problem, make_problem
    from autoplan.plan.coefficients import costs_for_layout
    from autoplan.plan.timeline import per_rank_sums

    units = ["embed"] + [f"block.{i}" for i in range(8)] + ["head"]
    stages = [units[:2]] + [[u] for u in units[2:-2]] + [units[-2:]]
    mem = {}
    for m in (8, 16):
        pb = make_problem("gpt-small", "dgx-a100-80gb:1", m, framework=framework)
        lay, pred = estimate_problem(pb, Layout(pp=8, num_microbatches=m, schedule="1f1b", stages=stages))
        mem[m] = pred.memory_per_stage_bytes
        costs = costs_for_layout(pb.profile, pb.cluster, lay, pb.train)
        (late,) = per_rank_sums(lay, costs, "late_grad_bytes")
        per_mb = sum(costs[n].act_bytes for n in stages[0]) + costs[stages[0][-1]].held_out_bytes
    assert mem[8][1:] == mem[16][1:]
    if first_rank_grows:
        assert late[0] > 0
        assert mem[16][0] - mem[8][0] == pytest.approx(min(late[0], per_mb), abs=8)
    else:
        assert late == [0] * 8 and mem[8] == mem[16]
