"""Any layout a published recipe uses is expressible; a refusal names the rule that fails.

The pipeline-schedule rules are checked against torch.distributed.pipelining's own schedule
constructors (no process group needed: they only read the stages' indices and group size), so
the planner never emits a layout the executor's torch schedules refuse.
"""

from __future__ import annotations

import pytest
from torch.distributed.pipelining.schedules import Schedule1F1B, ScheduleInterleaved1F1B

from autoplan.cli import main
from autoplan.errors import LayoutError
from autoplan.plan.api import complete_layout, estimate_problem, make_problem, solve_problem
from autoplan.plan.plan import Layout, Plan
from autoplan.plan.schedules import schedule_rule_violation
from autoplan.plan.search import SearchOptions


class _StageStub:
    """What a torch schedule's constructor reads of a PipelineStage."""

    def __init__(self, index: int, pp: int, vp: int, rank: int):
        self.stage_index, self.num_stages, self.group_size, self.group_rank = index, pp * vp, pp, rank
        self.is_first, self.is_last = index == 0, index == pp * vp - 1
        self.stage_index_to_group_rank = None


def _torch_accepts(schedule: str, pp: int, vp: int, m: int) -> bool:
    try:
        if schedule == "interleaved":
            ScheduleInterleaved1F1B([_StageStub(i * pp, pp, vp, 0) for i in range(vp)], n_microbatches=m)
        else:
            Schedule1F1B(_StageStub(0, pp, 1, 0), n_microbatches=m)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("pp", [2, 4, 8])
@pytest.mark.parametrize("vp", [1, 2, 3, 6])
def test_schedule_rules_never_admit_what_torch_refuses(pp, vp):
    schedule = "interleaved" if vp > 1 else "1f1b"
    for m in range(1, 4 * pp + 7):
        ours = schedule_rule_violation(schedule, pp=pp, vp=vp, num_microbatches=m)
        theirs = _torch_accepts(schedule, pp, vp, m)
        if ours is None:
            assert theirs, f"planner admits {schedule} pp={pp} vp={vp} m={m}, torch refuses it"
        elif not theirs:
            assert ("multiple" in ours) if vp > 1 else (">= pp" in ours)


def test_interleaved_relaxes_megatrons_multiple_of_pp():
    # torch's rule (m % max(1, m // pp) == 0), not Megatron's m % pp == 0: 10 micro-batches on 4 ranks run
    assert schedule_rule_violation("interleaved", pp=4, vp=2, num_microbatches=10) is None
    why = schedule_rule_violation("interleaved", pp=8, vp=6, num_microbatches=60)
    assert "multiple of max(1, num_microbatches // pp) = 7" in why and "got 60" in why


def test_gpt3_175b_vp6_on_96_layers_is_expressible():
    """NVIDIA's GPT-3 175B recipe on H100: tp4 pp8, 6 virtual stages (2 layers per chunk), mbs 1."""
    pb = make_problem("gpt3-175b", "dgx-h100-80gb:16", 256)
    lay, pred = estimate_problem(pb, complete_layout({"tp": 4, "pp": 8, "vp": 6, "mbs": 1}, 128, 256))
    assert (lay.dp, lay.tp, lay.pp, lay.vp, lay.num_microbatches, lay.schedule) == (4, 4, 8, 6, 64, "interleaved")
    assert len(lay.stages) == 48 and all(lay.stages)
    assert pred.step_time_s > 0


def test_solve_honours_a_fixed_vp_beyond_the_search_default():
    import dataclasses

    from autoplan.profile.assumptions import STACKS
    pb = make_problem("gpt3-175b", "dgx-h100-80gb:16", 256)
    # NVIDIA's published layout, on the stack that ran it
    pb = dataclasses.replace(pb, train=dataclasses.replace(pb.train, stack=STACKS["megatron-core-2024"]))
    opts = SearchOptions(fixed={"tp": 4, "pp": 8, "vp": 6, "mbs": 1, "recompute": "selective", "sp": 1}, top_k=1)
    assert opts.max_vp < 6
    plan = solve_problem(pb, opts, families=False)
    assert (plan.layout.vp, plan.layout.pp, plan.layout.tp) == (6, 8, 4)


@pytest.mark.parametrize("layout, batch, rule", [
    ("tp=4,pp=8,cp=1,vp=6,mbs=1", 240, "multiple of max(1, num_microbatches // pp) = 7 (pp=8), got 60"),
    ("tp=8,pp=16,zero=1", 256, "zero=1 needs dp > 1"),
    ("tp=4,pp=8,cp=1,mbs=16,schedule=1f1b", 256, "schedule 1f1b needs num_microbatches >= pp=8, got 4"),
    ("tp=4,pp=8,cp=1,mbs=32,vp=2", 256, "interleaved 1F1B needs num_microbatches >= pp=8, got 2"),
    ("tp=4,pp=8,mbs=3", 256, "does not divide the global batch 256"),
    ("dp=3,tp=8,pp=8", 256, "layout dp*tp*pp = 192 does not match the cluster's 128 devices"),   # not the batch
])
def test_refusals_name_the_rule(layout, batch, rule, capsys):
    """solve --layout and estimate --layout refuse with the failing rule, one line, exit code 2."""
    for command in ("solve", "estimate"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--model", "gpt3-175b", "--cluster", "dgx-h100-80gb:16", "--global-batch", str(batch),
                  "--layout", layout])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and rule in err[0], (command, err)


def test_layout_with_vp_needs_pp_and_interleaving():
    with pytest.raises(LayoutError, match="vp=2 needs schedule=interleaved"):
        Layout(pp=2, vp=2, schedule="1f1b")
    assert "needs pp > 1" in schedule_rule_violation("interleaved", pp=1, vp=2, num_microbatches=4)


def test_sequence_parallel_needs_the_sequence_to_split_over_tp():
    """sp=1 cuts each sequence into tp equal shards: the search offers it only where they are equal, and a
    layout or plan asking for uneven ones is refused in one line (gloo failed on 160 tokens over tp=3)."""
    from autoplan.plan.plan import sequence_split_violation
    from autoplan.plan.search import outer_layouts
    assert sequence_split_violation(160, tp=4, sp=1) is None and sequence_split_violation(160, tp=3, sp=0) is None
    assert "160 tokens into 3 equal shards" in sequence_split_violation(160, tp=3, sp=1)
    assert "40 tokens per context-parallel rank" in sequence_split_violation(160, cp=4, tp=3, sp=1)
    pb = make_problem("gpt-small", "dgx-h100-80gb:1", 16, seq_len=100)     # 100 tokens: tp 2 and 4 split, 8 not
    offered = {(lay.tp, lay.sp) for lay in outer_layouts(pb.profile, pb.cluster, pb.train, SearchOptions())}
    assert {(2, 1), (4, 1), (8, 0)} <= offered and (8, 1) not in offered
    for fixed in ({"tp": 8, "sp": 1, "mbs": 1}, {"tp": 8, "sp": 1, "mbs": 1, "stage_blocks": [12]}):
        with pytest.raises(LayoutError, match="sequence parallel .* tp=8 cannot split the sequence of 100 tokens"):
            solve_problem(pb, SearchOptions(fixed=fixed))
    plan = solve_problem(pb, SearchOptions(fixed={"tp": 4, "sp": 1, "mbs": 1}, top_k=1), families=False)
    d = plan.to_dict()
    d["layout"]["tp"], d["layout"]["dp"] = 8, plan.layout.dp // 2
    with pytest.raises(LayoutError, match="tp=8 cannot split"):
        Plan.from_dict(d)
