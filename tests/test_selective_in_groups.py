"""Selective recomputation inside groups costs what it added to the layer alone, scaled to the group."""

from __future__ import annotations

import pytest

from autoplan.plan.coefficient_sources import in_group_selective_s, in_group_terms
from autoplan.plan.plan import Layout
from autoplan.profile.formats import GroupTiming, LayerKindProfile, LayerTiming


def _block(selective_s: float) -> LayerKindProfile:
    alone = [LayerTiming(mbs=b, tp=1, forward_s=0.010 * b, backward_s=0.020 * b, saved_activation_bytes=1000 * b,
                         output_bytes=100 * b, selective_recompute_s=selective_s * b) for b in (1, 2, 4)]
    grouped = [GroupTiming(world=2, mbs=b, forward_s=0.015 * b, backward_s=0.030 * b) for b in (1, 2, 4)]
    return LayerKindProfile(param_count=10, param_bytes=40, tp_shardable=True, timings=alone, group_timings=grouped)


def test_the_measured_figure_is_scaled_by_the_layer_in_group_over_alone():
    kind = _block(selective_s=0.012)          # alone: 0.030 s per sample, selective adds 0.012 s (40%)
    lay = Layout(mbs=2, num_microbatches=1, recompute="selective")
    compute, recompute, tp_comm, _ = in_group_terms(kind, lay, 2, 1, 2, "selective", attn_flop_frac=0.1,
                                                    optimizer="adamw")
    assert compute == pytest.approx(0.090)    # in group: 1.5 x alone
    assert recompute == pytest.approx(0.024 * 1.5)   # the 40% it added alone, at the group's pace
    assert tp_comm == pytest.approx(0.0)


def test_without_the_figure_the_attention_share_stands_in():
    kind = _block(selective_s=0.0)
    assert in_group_selective_s(kind, 2, 1, 0.090) is None
    lay = Layout(mbs=2, num_microbatches=1, recompute="selective")
    _, recompute, _, _ = in_group_terms(kind, lay, 2, 1, 2, "selective", attn_flop_frac=0.1, optimizer="adamw")
    assert recompute == pytest.approx(0.030 * 0.1)   # in-group forward x the attention core's FLOP share


def test_the_measured_figure_counts_the_forward_under_the_policy_too(monkeypatch):
    """measure_case's selective figure is forward+backward under the wrapper minus the plain ones (the
    op-level policy sees every op of the forward); the timer is replaced by fixed figures."""
    import torch

    import autoplan.profile.layer_figures as lf
    from autoplan.profile.layer_cases import LayerCase
    from autoplan.profile.timing import TimingSettings

    def fake_timer(case, settings):          # plain: 1 + 2 s; under the selective wrapper: 1.5 + 3 s
        wrapped = "CheckpointWrapper" in type(case.module).__name__
        return (1.5, 3.0) if wrapped else (1.0, 2.0)
    monkeypatch.setattr(lf, "time_forward_backward", fake_timer)
    x = torch.randn(1, 4, 8, requires_grad=True)
    case = LayerCase(torch.nn.Linear(8, 8), (x,), torch.ones(1, 4, 8))
    t = lf.measure_case(case, TimingSettings(torch.device("cpu"), warmup=0, repeats=1), mbs=1, tp=1, selective=True)
    assert t.selective_recompute_s == pytest.approx(1.5)     # 0.5 in forward + 1.0 in backward
