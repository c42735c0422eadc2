"""Training precision threaded from the profile to the plan, and one device as a cluster.

- ``profile model --precision bf16`` measures as the executor trains (fp32 parameters under autocast):
  the profile records bf16, parameters count 4 bytes, autocast's 16-bit weight copies are not counted
  as activations, and the block saves fewer bytes than in fp32; blocks also carry selective
  recomputation's measured bytes and backward time.
- A profile of one precision is refused for a plan of another, in one ``error:`` line (exit 2); by
  default the plan takes the profile's precision.
- ``profile cluster --nproc 1`` writes a one-device profile (no links); solve and estimate run on it.
- The cost model: parameters and gradients stay fp32 in mixed precision (+2 bytes of 16-bit compute
  copies); one micro-batch without DP or PP counts max(activations, gradients) per layer; the
  optimizer step's own peak (foreach AdamW's buffer on CUDA) bounds the peak from below; selective
  recomputation uses the measured ratio when the profile has it.

    python -m pytest tests/test_precision_and_one_device.py -q
"""

from __future__ import annotations

import copy
import json
import subprocess
from dataclasses import replace

import pytest
import torch

from cli_utils import run_cli

from autoplan.errors import InputError
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.plan.coefficients import layer_costs
from autoplan.plan.cost import evaluate
from autoplan.plan.training import TrainingConfig
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ClusterProfile, ModelProfile
from autoplan.profile.layer_figures import is_parameter_copy, saved_activation_bytes
from autoplan.profile.layers import profile_model


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def profiles():
    kw = dict(mbs_list=(1, 2), warmup=0, repeats=1, threads=1, optimizer_min_params=1000)
    return {p: profile_model("gpt-tiny", precision=p, **kw) for p in ("fp32", "bf16")}


def test_bf16_profile_is_measured_as_the_executor_trains(profiles):
    fp32, bf16 = profiles["fp32"], profiles["bf16"]
    assert bf16.precision == "bf16" and fp32.precision == "fp32"
    assert "autocast" in bf16.environment["precision_measurement"]
    blk32, blk16 = fp32.kinds["block"], bf16.kinds["block"]
    assert blk16.param_bytes == 4 * blk16.param_count == blk32.param_bytes      # fp32 master weights
    for t32, t16 in zip(blk32.timings, blk16.timings):
        # 16-bit matmul inputs, fp32 residual stream: fewer bytes, but more than half of fp32
        assert 0.5 * t32.saved_activation_bytes < t16.saved_activation_bytes < t32.saved_activation_bytes
        assert t16.output_bytes == t32.output_bytes                     # the residual stream stays fp32
        assert t16.saved_activation_bytes_selective is not None and t16.selective_recompute_s >= 0
        assert 0 < t16.saved_activation_bytes_selective < t16.saved_activation_bytes
    assert fp32.kinds["head"].timings[0].saved_activation_bytes_selective is None   # only blocks recompute


def test_autocast_weight_copies_are_not_activations():
    lin = torch.nn.Linear(64, 64, bias=False)
    x = torch.randn(4, 64, requires_grad=True)
    params = list(lin.parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        w16 = lin.weight.to(torch.bfloat16)
        assert is_parameter_copy(w16, params) and is_parameter_copy(w16.t(), params)
        assert not is_parameter_copy(x * 2, params)
        saved = saved_activation_bytes(lambda: lin(x), params)
    assert saved == 4 * 64 * 2        # the bf16 copy of x only: the 64x64 weight copy is left out


def test_profile_round_trips_the_selective_figures(profiles, tmp_path):
    profiles["bf16"].save(tmp_path / "m.json")
    back = ModelProfile.load(tmp_path / "m.json")
    t = back.kinds["block"].timing(3, 1)           # beyond the measured mbs: selective bytes scaled too
    two = back.kinds["block"].timing(2, 1)
    assert t.saved_activation_bytes_selective == -(-two.saved_activation_bytes_selective * 3 // 2)


def test_a_profile_of_another_precision_is_refused_in_one_line(profiles, tmp_path):
    model = tmp_path / "fp32.json"
    profiles["fp32"].save(model)
    line = one_line_error(run_cli("solve", "--model", str(model), "--cluster", "dgx-h100-80gb:1",
                                  "--global-batch", "8", "--precision", "bf16"))
    assert "fp32" in line and "bf16" in line and "--precision bf16" in line
    bf16 = tmp_path / "bf16.json"
    profiles["bf16"].save(bf16)
    line = one_line_error(run_cli("estimate", "--model", str(bf16), "--cluster", "dgx-h100-80gb:1",
                                  "--global-batch", "8", "--layout", "dp=8", "--precision", "fp32"))
    assert "measured in bf16" in line
    one_line_error(run_cli("solve", "--model", str(bf16), "--cluster", "dgx-h100-80gb:1", "--global-batch", "8",
                           "--precision", "fp8"))


def test_the_plan_takes_the_profile_precision_by_default(profiles, tmp_path):
    from autoplan.plan.api import make_problem
    model = tmp_path / "fp32.json"
    profiles["fp32"].save(model)
    assert make_problem(str(model), "dgx-h100-80gb:1", 8).train.precision == "fp32"   # not the GPU default
    with pytest.raises(InputError, match="measured in fp32"):
        make_problem(str(model), "dgx-h100-80gb:1", 8, precision="bf16")


def test_one_device_cluster_profile_and_planning(profiles, tmp_path):
    cluster = tmp_path / "one.json"
    proc = run_cli("profile", "cluster", "--nproc", "1", "--memory-per-device", "64MiB", "--out", str(cluster))
    assert proc.returncode == 0, proc.stderr
    assert "1 device" in proc.stdout and "TFLOP/s" in proc.stdout
    cl = ClusterProfile.load(cluster)
    assert cl.world_size == 1 and cl.links == {} and cl.device.memory_bytes == 64 * 2**20
    assert cl.device.compute_flops_per_s > 0 and cl.device.memory_bandwidth_bytes_per_s > 0
    model = tmp_path / "bf16.json"
    profiles["bf16"].save(model)
    plan = tmp_path / "plan.json"
    proc = run_cli("solve", "--model", str(model), "--cluster", str(cluster), "--global-batch", "4", "--out", str(plan))
    assert proc.returncode == 0, proc.stderr
    d = json.loads(plan.read_text())
    assert d["layout"]["dp"] * d["layout"]["tp"] * d["layout"]["pp"] == 1
    assert d["training"]["precision"] == "bf16"
    proc = run_cli("estimate", "--model", str(model), "--cluster", str(cluster), "--global-batch", "4",
                   "--layout", "mbs=2,recompute=selective", "--json")
    assert proc.returncode == 0, proc.stderr
    est = json.loads(proc.stdout)
    assert est["layout"]["num_microbatches"] == 2 and est["predicted"]["breakdown_s"]["recompute"] > 0
    one_line_error(run_cli("profile", "cluster", "--nproc", "0", "--out", str(tmp_path / "x.json")))
    one_line_error(run_cli("profile", "cluster", "--nproc", "2", "--device", "cuda", "--out", str(tmp_path / "x.json")))
    assert not (tmp_path / "x.json").exists()


# --------------------------------------------------------------------------------------------
# the cost model's memory terms
# --------------------------------------------------------------------------------------------

def _one_device(profile: ModelProfile, device_type: str = "cpu") -> ClusterProfile:
    from autoplan.profile.formats import DeviceSpec
    return ClusterProfile(name="one", num_nodes=1, devices_per_node=1, links={},
                          device=DeviceSpec(type=device_type, memory_bytes=2**40, compute_flops_per_s=1e12))


def test_mixed_precision_holds_fp32_state_and_16_bit_copies(profiles):
    mixed, fp32 = TrainingConfig(8, precision="bf16"), TrainingConfig(8, precision="fp32")
    assert mixed.state_bytes_per_param() == fp32.state_bytes_per_param() == (4, 4, 8)
    assert mixed.compute_weight_bytes_per_param() == 2 and fp32.compute_weight_bytes_per_param() == 4
    prof = profiles["bf16"]
    cl = _one_device(prof)
    lay = Layout(mbs=2, num_microbatches=2)            # accumulation: gradients held with activations
    c = layer_costs(prof, cl, lay, mixed)["block.0"]
    n = prof.kinds["block"].param_count
    assert c.static_bytes == 4 * n + 4 * n + 8 * n + 2 * n       # fp32 param, grad, Adam; bf16 copy
    assert c.optimizer_phase_bytes == 16 * n                       # CPU: no foreach temporaries


def test_one_microbatch_counts_gradients_in_place_of_freed_activations(profiles):
    prof, train = profiles["fp32"], TrainingConfig(2, precision="fp32")
    cl = _one_device(prof)
    one = layer_costs(prof, cl, Layout(mbs=2, num_microbatches=1), train)
    two = layer_costs(prof, cl, Layout(mbs=1, num_microbatches=2), train)
    for name in ("embed", "block.0", "head"):
        n = prof.kind_of(name).param_count
        assert one[name].static_bytes == two[name].static_bytes - 4 * n
        assert one[name].act_bytes >= 4 * n


def test_the_optimizer_step_can_set_the_peak(profiles):
    prof, train = profiles["fp32"], TrainingConfig(1, precision="fp32", optimizer="adamw")
    lay = Layout(mbs=1, num_microbatches=1, recompute="full", stages=[prof.layer_names()])
    cpu = evaluate(prof, _one_device(prof, "cpu"), lay, train)
    gpu = evaluate(prof, _one_device(prof, "cuda"), lay, train)
    n = prof.total_params()
    assert gpu.memory_breakdown_bytes["optimizer_step_peak"] == 20 * n    # + foreach AdamW's sqrt(v)
    # tensor by tensor on CPU: two temporaries of the largest tensor (the head's weight here) at a time
    largest = max(prof.kinds[k].param_count for k in ("embed", "head"))
    assert cpu.memory_breakdown_bytes["optimizer_step_peak"] == 16 * n + 2 * 4 * largest
    assert gpu.peak_memory_bytes >= 20 * n and gpu.peak_memory_bytes >= cpu.peak_memory_bytes


def test_cpu_adamw_step_holds_two_temporaries_of_its_largest_tensor():
    """What ``LayerCost.optimizer_transient_bytes`` stands on, measured: torch's AdamW on CPU, with
    the live-tensor tracker, holds two tensors of the largest parameter's size beyond its state."""
    from autoplan.plan.coefficients import SINGLE_TENSOR_ADAMW_TEMPORARIES
    from autoplan.profile.memory import LiveTensorTracker, state_tensors
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(4096, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 4096))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        model(torch.randint(0, 4096, (2, 8))).float().pow(2).mean().backward()
        opt.step()
    with LiveTensorTracker(state_tensors(model.parameters(), opt)) as tr:
        at_entry = tr.current_bytes
        opt.step()
    largest = max(p.numel() for p in model.parameters()) * 4
    extra = tr.peak_bytes - at_entry - SINGLE_TENSOR_ADAMW_TEMPORARIES * largest
    assert 0 <= extra < 0.01 * largest          # and a few bytes of scalars (the step counts)


def test_selective_recompute_uses_the_measured_figures(profiles):
    prof, train = copy.deepcopy(profiles["bf16"]), TrainingConfig(4, precision="bf16")
    lay = Layout(mbs=2, num_microbatches=2, recompute="selective")     # accumulation: activations as measured
    t = prof.kinds["block"].timing(2, 1)
    c = layer_costs(prof, _one_device(prof), lay, train)["block.0"]
    assert abs(c.act_bytes - t.saved_activation_bytes_selective) <= 1
    if t.selective_recompute_s > 0:        # measured (0: within the noise, the FLOP share stands in)
        assert c.recompute_s == pytest.approx(t.selective_recompute_s)
    # without the measured figures the shape's rule applies: another number
    for k in prof.kinds.values():
        k.timings = [replace(x, saved_activation_bytes_selective=None, selective_recompute_s=0.0) for x in k.timings]
    derived = layer_costs(prof, _one_device(prof), lay, train)["block.0"]
    assert derived.recompute_s > 0 and abs(derived.act_bytes - c.act_bytes) > 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_validate_top_3_on_one_process(profiles, tmp_path):
    from autoplan.profile.links import profile_one_device
    cluster, model = tmp_path / "one.json", tmp_path / "bf16.json"
    profile_one_device("cpu", memory_per_device_bytes=64 * 2**20).save(cluster)
    profiles["bf16"].save(model)
    proc = run_cli("validate", "--model", str(model), "--cluster", str(cluster), "--global-batch", "4",
                   "--top-k", "3", "--steps", "1", "--warmup", "1", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout)["runs"]
    assert len(runs) == 3, runs
    assert all(r["measured"] and r["measured"]["step_time_s"] > 0 and r["measured"]["peak_memory_bytes"] > 0
               for r in runs), runs
    lays = [r["layout"] for r in runs]
    assert all(l["dp"] * l["tp"] * l["pp"] == 1 for l in lays)
    assert len({(l["mbs"], l["recompute"]) for l in lays}) == 3        # micro-batching and recompute still vary
