"""Layer measurement: real timings of gpt-tiny, saved-activation accounting, TP-rank blocks."""

from __future__ import annotations

import pytest
import torch

from autoplan.errors import InputError
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.profile import analytic
from autoplan.profile.formats import ModelProfile
from autoplan.profile.layer_cases import tp_rank_block
from autoplan.profile.layer_figures import saved_activation_bytes
from autoplan.profile.layers import profile_model
from autoplan.profile.timing import ProgressEvent

TINY = BUILTIN_SHAPES["gpt-tiny"]


@pytest.fixture(scope="module")
def tiny_events() -> tuple[ModelProfile, list[ProgressEvent]]:
    events: list[ProgressEvent] = []
    prof = profile_model("gpt-tiny", mbs_list=(1, 2), tp_list=(1, 2), warmup=1, repeats=2, threads=1,
                         progress=events.append)
    return prof, events


def test_identical_blocks_measured_once(tiny_events):
    prof, events = tiny_events
    assert set(prof.kinds) == {"embed", "block", "head"}
    assert prof.layer_names() == ["embed"] + [f"block.{i}" for i in range(TINY.layers)] + ["head"]
    assert prof.edges == list(zip(prof.layer_names(), prof.layer_names()[1:]))
    block = prof.kinds["block"]
    assert sorted((t.mbs, t.tp) for t in block.timings) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert sorted((t.mbs, t.tp) for t in prof.kinds["head"].timings) == [(1, 1), (2, 1)]
    # one event per (kind, mbs, tp) plus the optimizer
    assert [e.done for e in events] == list(range(1, 10)) and events[-1].total == 9


def test_times_and_counts_are_positive_and_exact_where_known(tiny_events):
    prof, _ = tiny_events
    for kind, kp in prof.kinds.items():
        assert kp.param_count == analytic.param_count(kind, TINY)
        assert kp.param_bytes == 4 * kp.param_count
        for t in kp.timings:
            assert t.forward_s > 0 and t.backward_s > 0, (kind, t)
            width = TINY.vocab if kind == "head" else TINY.hidden
            assert t.output_bytes == t.mbs * TINY.seq_len * width * 4
    assert prof.total_params() == TINY.param_count()
    assert prof.optimizer_step_s_per_param > 0 and prof.optimizer_step_s_per_param_sgd > 0
    assert prof.environment["threads"] == 1 and prof.environment["torch"] == torch.__version__


def test_saved_activations_near_the_formula(tiny_events):
    prof, _ = tiny_events
    for t in prof.kinds["block"].timings:
        formula = analytic.saved_activation_bytes("block", TINY, TINY.seq_len, t.mbs, t.tp, bytes_per_element=4)
        # measured has no dropout masks and a fused CPU attention; the formula is the Megatron count
        assert 0.4 * formula < t.saved_activation_bytes < 2.0 * formula, (t, formula)
    by = {(t.mbs, t.tp): t.saved_activation_bytes for t in prof.kinds["block"].timings}
    assert by[(2, 1)] == 2 * by[(1, 1)]
    assert by[(1, 2)] < by[(1, 1)]
    embed = {t.mbs: t.saved_activation_bytes for t in prof.kinds["embed"].timings}
    assert embed[1] == 8 * TINY.seq_len          # the int64 token ids, nothing else


def test_json_round_trip(tiny_events, tmp_path):
    prof, _ = tiny_events
    assert ModelProfile.from_dict(prof.to_dict()).to_dict() == prof.to_dict()
    prof.save(tmp_path / "m.json")
    assert ModelProfile.load(tmp_path / "m.json").to_dict() == prof.to_dict()


def test_saved_bytes_count_storages_once_and_skip_parameters():
    w = torch.nn.Parameter(torch.randn(4, 8))
    x = torch.randn(4, 8, requires_grad=True)

    def run():
        # sin saves x; cos saves a view of x (same storage); mul saves x and the parameter
        return (x.sin() + x.view(8, 4).cos().view(4, 8) + x * w).sum()
    assert saved_activation_bytes(run, [w]) == 4 * 8 * 4


def test_tp_rank_block_holds_one_shard():
    blk = tp_rank_block(TINY, 2)
    assert blk.attn.wq.out_features == TINY.hidden // 2
    assert blk.attn.wo.in_features == TINY.hidden // 2
    assert blk.mlp.w1.out_features == TINY.ffn_hidden // 2
    assert blk.mlp.w2.in_features == TINY.ffn_hidden // 2
    y = blk(torch.randn(2, 8, TINY.hidden))
    assert y.shape == (2, 8, TINY.hidden)


def test_bad_input():
    with pytest.raises(InputError, match="gpt-tiny"):
        profile_model("no-such-model")
    with pytest.raises(InputError, match="TP degree 3"):
        profile_model("gpt-tiny", tp_list=(3,))
    with pytest.raises(InputError, match="mbs_list"):
        profile_model("gpt-tiny", mbs_list=(0,))
    with pytest.raises(InputError, match="precision"):
        profile_model("gpt-tiny", precision="fp8")


def test_shape_json_spec(tmp_path):
    spec = tmp_path / "mini.json"
    spec.write_text('{"layers": 2, "hidden": 32, "heads": 2, "kv_heads": 1, "ffn_hidden": 64, "vocab": 50, "seq_len": 8}')
    prof = profile_model(str(spec), mbs_list=(1,), warmup=0, repeats=1, optimizer_min_params=1000)
    assert prof.layer_names() == ["embed", "block.0", "block.1", "head"]
    assert prof.shape["kv_heads"] == 1 and prof.seq_len == 8
    assert prof.kinds["block"].param_count == 2 * 32 * 32 + 2 * 32 * 16 + 2 * 32 * 64 + 2 * 32


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_loss_backward_holds_what_the_cost_model_counts(tiny_events, precision):
    """The most the head's backward (the executor's loss: fp32 cross entropy on the logits) holds at
    once beyond what was live when it began, counted by the live-tensor tracker, against the
    workspace the cost model gives the last pipeline rank for it (``LayerCost.backward_transient_bytes``:
    two fp32 logit-sized gradients; the output's gradient alone, which it counted before, is 1/2 of
    that in fp32 and 1/4 in bf16)."""
    from autoplan.plan.coefficients import layer_costs
    from autoplan.plan.layout_input import complete_layout
    from autoplan.plan.training import TrainingConfig
    from autoplan.profile.formats import ClusterProfile
    from autoplan.profile.layer_cases import make_case
    from autoplan.profile.memory import LiveTensorTracker

    prof, _ = tiny_events
    mbs = 2
    autocast = torch.bfloat16 if precision == "bf16" else None
    case = make_case("head", TINY, 1, mbs, prof.seq_len, torch.device("cpu"), torch.float32, autocast_dtype=autocast)
    for p in case.module.parameters():     # gradients exist from the step's first backward on
        p.grad = torch.zeros_like(p)
    with LiveTensorTracker([*case.module.parameters(), *[p.grad for p in case.module.parameters()], *case.inputs]) as tr:
        root, out = case.forward()
        tr.refresh()
        before = tr.current_bytes
        tr.peak_bytes = before
        case.backward(root)
        held = tr.peak_bytes - before
        del root, out

    cluster = ClusterProfile.load("profiles/cpu-2proc.json")
    layout = complete_layout({"pp": 2, "mbs": mbs}, 2, 2 * mbs)
    costs = layer_costs(prof, cluster, layout, TrainingConfig(global_batch=2 * mbs, precision=precision))
    head = costs["head"]
    counted = max(head.out_bytes, head.backward_transient_bytes)
    assert 0.9 * held <= counted <= 1.1 * held, (counted, held, head.out_bytes)
    assert max(head.out_bytes, costs["block.0"].backward_transient_bytes) < 0.6 * held   # the rule it replaces


def test_times_at_unmeasured_micro_batch_sizes():
    """Between measured sizes: the line between the two neighbours (the measurements themselves are
    kept); beyond them: never cheaper per sample than the nearest measured size, and following a
    per-sample cost that rises (the CPU case: 2-process SwiGLU model, 0.300 s/sample at mbs 4 and 0.313 at
    8, where a least-squares line through 1, 2, 4 had given 0.256)."""
    from autoplan.profile.formats import mbs_curve
    xs, ys = [1, 2, 4], [0.34, 0.60, 1.08]
    assert [mbs_curve(xs, ys, x) for x in xs] == ys
    assert mbs_curve(xs, ys, 3) == pytest.approx(0.84)
    assert mbs_curve(xs, ys, 8) == pytest.approx(1.08 * 2)           # falling per-sample cost: held at mbs 4's
    assert mbs_curve([2, 4], [0.5, 1.2], 8) == pytest.approx(2.6)     # rising: the line through the last two
    assert mbs_curve([2, 4], [0.6, 1.0], 1) == pytest.approx(0.4)     # below: the line (dearer per sample)
    assert mbs_curve([2, 4], [0.5, 1.2], 1) == pytest.approx(0.25)    # ... never cheaper than at mbs 2
    assert mbs_curve([4], [1.0], 8) == pytest.approx(2.0)
