"""Layers measured inside real process groups (profile model --nproc) and costed from them."""

import json
import subprocess
import sys

import pytest

from autoplan.plan.api import Problem, complete_layout, estimate_problem
from autoplan.plan.coefficient_sources import in_group_world
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.training import TrainingConfig
from autoplan.profile.formats import GroupTiming, ModelProfile
from autoplan.profile.links import profile_cluster


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    out = tmp_path_factory.mktemp("groups") / "model.json"
    proc = subprocess.run([sys.executable, "-m", "autoplan.cli", "profile", "model", "--model", "gpt-tiny",
                           "--out", str(out), "--mbs", "1,2", "--repeats", "2", "--warmup", "1", "--nproc", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return ModelProfile.load(out)


@pytest.mark.slow
def test_profile_in_groups_writes_every_case(grouped):
    block = grouped.kinds["block"]
    keys = {(g.world, g.tp, g.sp, g.dp, g.mbs) for g in block.group_timings}
    for mbs in (1, 2):
        assert {(2, 1, 0, 1, mbs), (2, 2, 0, 1, mbs), (2, 2, 1, 1, mbs), (2, 1, 0, 2, mbs)} <= keys
    for g in block.group_timings:
        assert g.forward_s > 0 and g.backward_s > 0 and g.optimizer_s > 0
        assert (g.backward_sync_s > 0) == (g.dp > 1)
    assert {g.mbs for g in grouped.whole_model_timings} == {1, 2}
    assert all(k.group_timing(1, world=2) is not None for k in grouped.kinds.values())
    # short real pipelines of the model (2 stages, 1F1B and interleaved, 2 and 8 micro-batches) and
    # what they say a pipeline costs beyond its layers
    runs = {(t.pp, t.vp, t.schedule, t.num_microbatches) for t in grouped.pipeline_timings}
    assert runs == {(2, 1, "1f1b", 2), (2, 1, "1f1b", 8), (2, 2, "interleaved", 2), (2, 2, "interleaved", 8)}
    assert all(t.step_s > 0 and t.world == 2 and t.mbs == 1 for t in grouped.pipeline_timings)
    costs = grouped.pipeline_cost(2)
    assert costs is not None and costs.per_chunk_s >= 0 and 0 <= costs.idle_share <= 1


@pytest.mark.slow
def test_cost_model_uses_group_figures(grouped, tmp_path):
    cl = profile_cluster(2, memory_per_device_bytes=2**30, max_size_bytes=1 << 16, repeats=2)
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
