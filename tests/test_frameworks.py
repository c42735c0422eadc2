"""--framework, context parallel and fp8 in the planner: rules, costs and bad input."""

import json

import pytest

from cli_utils import run_cli

from autoplan.errors import InputError, LayoutError
from autoplan.plan.api import estimate, solve
from autoplan.plan.frameworks import FRAMEWORKS, framework, framework_violation
from autoplan.plan.plan import Plan



def test_framework_specs():
    assert framework("megatron").spec == "megatron" and framework("megatron@2021").stack.name == "megatron-lm-2021"
    assert framework("autoplan").stack.name == "autoplan"
    for spec in FRAMEWORKS:
        assert framework(spec).spec in (spec, spec.split("@")[0])
    with pytest.raises(InputError, match="unknown framework 'megatrn'"):
        framework("megatrn")
    with pytest.raises(InputError, match="no release '1999'"):
        framework("megatron@1999")


@pytest.mark.parametrize("spec, layout, why", [
    ("deepspeed", dict(pp=2, zero=3), "does not combine zero=3 with pipeline"),
    ("megatron", dict(pp=2, schedule="gpipe"), "does not run the gpipe schedule"),
    ("megatron", dict(pp=4, vp=2, schedule="interleaved", num_microbatches=6), "multiple of pp=4"),
    ("composer", dict(tp=2), "no tensor parallel"),
    ("deepspeed", dict(cp=2), "no context parallel"),
    ("torchtitan", dict(zero=1), "no zero=1"),
    ("megatron@2021", dict(cp=2), "no context parallel"),
])
def test_framework_rules(spec, layout, why):
    assert why in framework_violation(framework(spec), layout)
    assert framework_violation(framework("autoplan"), {k: v for k, v in layout.items() if k != "num_microbatches"}) \
        is None


def test_fp8_rules():
    assert "fp8 tensor cores" in framework_violation(framework("megatron"), {}, "fp8", chip="A100")
    assert "does not train in fp8" in framework_violation(framework("deepspeed"), {}, "fp8", chip="H100")
    assert "without tensor parallel" in framework_violation(framework("autoplan"), {"tp": 2}, "fp8", chip="H100")
    assert framework_violation(framework("megatron"), {"tp": 8}, "fp8", chip="H100") is None


def test_fp8_is_faster_and_holds_weight_copies():
    kw = dict(model="llama3-8b", cluster="dgx-h100-80gb:1", global_batch=8, layout="tp=1,zero=3")
    _, bf16 = estimate(**kw, precision="bf16", framework="torchtitan")
    _, fp8 = estimate(**kw, precision="fp8", framework="torchtitan")
    assert 1.15 < bf16.breakdown_s["compute"] / fp8.breakdown_s["compute"] < 2.0   # only the block GEMMs are fp8
    # one layer's fp8 weights and their transpose (2 bytes per parameter) while it runs; fp8 inputs saved
    assert fp8.memory_breakdown_bytes["workspace"] > bf16.memory_breakdown_bytes["workspace"]
    assert fp8.memory_breakdown_bytes["activations"] < bf16.memory_breakdown_bytes["activations"]
    assert fp8.memory_breakdown_bytes["params_grads_optimizer"] == bf16.memory_breakdown_bytes["params_grads_optimizer"]


def test_context_parallel_costs():
    kw = dict(model="llama3-8b", cluster="dgx-h100-80gb:2", global_batch=16, precision="bf16")
    _, no_cp = estimate(**kw, layout="tp=2,cp=1,zero=1", framework="megatron")
    _, ring = estimate(**kw, layout="tp=2,cp=2,zero=1", framework="megatron")
    _, gather = estimate(**kw, layout="tp=2,cp=2,zero=1", framework="autoplan")
    # each cp rank computes 1/cp of every sequence: about the same compute per step with half the replicas,
    # a little more (the GEMMs of fewer tokens run less efficiently)
    assert 1.0 <= ring.breakdown_s["compute"] / no_cp.breakdown_s["compute"] < 1.15
    assert ring.memory_breakdown_bytes["activations"] == pytest.approx(no_cp.memory_breakdown_bytes["activations"] / 2,
                                                                        rel=0.02)
    # Megatron's ring hides the exchange behind attention at 8K tokens; the all-gather does not
    assert ring.breakdown_s.get("cp_comm", 0.0) < gather.breakdown_s["cp_comm"]
    assert gather.breakdown_s["cp_comm"] > 0


def test_torch_rotation_exchanges_every_query_head_and_hides_only_the_first_step():
    from autoplan.plan.coefficient_sources import cp_exchange_s
    from autoplan.plan.plan import Layout
    from autoplan.profile.hardware import catalogue_cluster
    cluster, lay = catalogue_cluster("dgx-h100-80gb:1"), Layout(cp=4)
    kv_b = 256e6
    gather = cluster.collective_time_s("all_gather", 4 * kv_b, 4, False)
    send_grads = cluster.collective_time_s("send_recv", 2 * kv_b, 2, False)
    # no attention to hide behind: the gathers of forward and backward, and the fp32 gradients around the ring
    assert cp_exchange_s(cluster, lay, kv_b, 0.0, 0.0, "torch_rotate", False, "none") == pytest.approx(
        2 * gather + 4 * send_grads)
    # long steps hide all but the last gradient send, waited for after the ring
    assert cp_exchange_s(cluster, lay, kv_b, 10.0, 10.0, "torch_rotate", False, "none") == pytest.approx(send_grads)
    # torchtitan repeats Llama's 8 KV heads to the 32 query heads before attention: 4x the bytes of the
    # exposed last send (and more of the gathers exposed); it gathers K,V again in backward, keeping none
    import dataclasses

    from autoplan.plan.api import estimate_problem, make_problem
    from autoplan.plan.layout_input import complete_layout
    pb = make_problem("llama3-8b", "dgx-h100-80gb:1", 1, seq_len=65536, framework="torchtitan")
    lay = complete_layout(dict(tp=1, cp=8, dp=1, zero=3, mbs=1), 8, 1)
    _, titan = estimate_problem(pb, lay)
    gqa = dataclasses.replace(pb, train=dataclasses.replace(pb.train, stack=pb.train.stack.with_(
        cp_kv_heads_repeated=False)))
    _, small_kv = estimate_problem(gqa, lay)
    assert titan.breakdown_s["cp_comm"] > 0.99 * 4 * small_kv.breakdown_s["cp_comm"] > 0
    _, ours = estimate(model="llama3-8b", cluster="dgx-h100-80gb:1", global_batch=1, seq_len=65536,
                       layout="tp=1,cp=8,dp=1,zero=3", framework="autoplan")
    assert titan.memory_breakdown_bytes["activations"] < ours.memory_breakdown_bytes["activations"]


def test_solve_searches_context_parallel_at_long_sequences():
    plan = solve("llama3-8b", "dgx-h100-80gb:1", 8, seq_len=131072, framework="megatron")
    assert plan.layout.cp > 1 and plan.training.framework == "megatron"
    assert plan.layout.world_size == 8
    # the explanation's "pure data parallel" alternative splits nothing, the sequence included
    ddp = [a for a in plan.alternatives if a.family == "pure data parallel (DDP)"]
    assert len(ddp) == 1 and (ddp[0].layout.tp, ddp[0].layout.pp, ddp[0].layout.cp) == (1, 1, 1)
    # and so does --preset ddp (what it fixes; given fields still win)
    from autoplan.plan.presets import preset_constraints, with_preset
    assert preset_constraints("ddp", None, None) == {"tp": 1, "pp": 1, "cp": 1, "zero": 0}
    assert with_preset("ddp", {"cp": 2}, None, None)["cp"] == 2


@pytest.mark.parametrize("args, why", [
    (["--layout", "tp=2,cp=3"], "does not divide the sequence"),
    (["--layout", "tp=8,cp=16,pp=16,dp=8"], "does not match"),
    (["--layout", "tp=1,zero=3", "--precision", "fp8", "--cluster", "dgx-a100-80gb:2"], "fp8 tensor cores"),
    (["--layout", "tp=1,zero=3", "--precision", "fp8", "--framework", "deepspeed"], "does not train in fp8"),
    (["--layout", "tp=2,cp=2", "--framework", "megatrn"], "unknown framework"),
    (["--layout", "tp=2", "--framework", "megatron", "--cluster", "profiles/cpu-4proc.json"], "catalogue clusters"),
])
def test_bad_input_is_one_line(args, why):
    base = {"--model": "llama3-8b", "--cluster": "dgx-h100-80gb:2", "--global-batch": "16"}
    for k in list(base):
        if k in args:
            base.pop(k)
    r = run_cli("estimate", *[x for kv in base.items() for x in kv], *args)
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and why in lines[0], r.stderr


def test_plan_records_framework_and_run_refuses_it(tmp_path):
    out = tmp_path / "plan.json"
    r = run_cli("solve", "--model", "gpt3-1.3b", "--cluster", "dgx-a100-80gb:1", "--global-batch", "64",
             "--framework", "megatron@2022", "--out", str(out), "--layout", "tp=2,pp=1")
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["training"]["framework"] == "megatron@2022"
    assert Plan.load(out).training.framework == "megatron@2022"
    r = run_cli("run", str(out), "--", "examples/train_gpt.py")
    assert r.returncode == 2 and "made for --framework megatron@2022" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_estimate_refuses_a_layout_the_framework_cannot_run():
    with pytest.raises(LayoutError, match="zero=3 with pipeline"):
        estimate("gpt3-1.3b", "dgx-a100-80gb:2", 64, "tp=2,pp=2,zero=3", framework="deepspeed")


def test_adamw_bf16_state_is_six_bytes_and_megatron_2024_only():
    """NeMo 1's distributed_fused_adam with 16-bit state (Nemotron-4 340B's recipe): 2 + 2 + 6/dp bytes per
    parameter instead of 2 + 2 + 12/dp; other frameworks (autoplan's executor included) refuse it."""
    kw = dict(model="llama3-8b", cluster="dgx-h100-80gb:1", global_batch=8, layout="tp=1,dp=8,zero=1",
              precision="bf16", framework="megatron@2024")
    _, fp32_state = estimate(**kw)
    _, bf16_state = estimate(**kw, optimizer="adamw-bf16")
    params = 8.03e9
    saved = fp32_state.memory_breakdown_bytes["params_grads_optimizer"] \
        - bf16_state.memory_breakdown_bytes["params_grads_optimizer"]
    assert saved == pytest.approx(params * 6 / 8, rel=0.05)
    for spec in ("megatron", "autoplan", "torchtitan"):
        with pytest.raises(InputError, match="no optimizer adamw-bf16"):
            estimate(**{**kw, "framework": spec}, optimizer="adamw-bf16")
    out = run_cli("estimate", "--model", "llama3-8b", "--cluster", "dgx-h100-80gb:1", "--global-batch", "8",
                  "--layout", "dp=8", "--optimizer", "adamw-bf16")
    assert out.returncode == 2 and out.stderr.startswith("error:") and len(out.stderr.strip().splitlines()) == 1


def test_fp8_rowwise_rules_and_costs():
    """--precision fp8-rowwise (torchao's rowwise recipe): torchtitan and autoplan's executor have it, Megatron
    does not; under TP torchtitan's rowwise GEMMs run at the bf16 rate (torchtitan issue 1207), without TP at
    the fp8 rate, the casts paid either way."""
    assert "no rowwise-scaled fp8" in framework_violation(framework("megatron"), {}, "fp8-rowwise", chip="H100")
    assert framework_violation(framework("torchtitan"), {"tp": 8}, "fp8-rowwise", chip="H100") is None
    kw = dict(model="llama3-8b", cluster="dgx-h100-80gb:1", global_batch=8, framework="torchtitan")
    compute = {}
    for tp in (1, 2):
        for prec in ("bf16", "fp8", "fp8-rowwise"):
            _, p = estimate(**kw, layout=f"tp={tp},zero=3", precision=prec)
            compute[tp, prec] = p.breakdown_s["compute"]
    assert compute[1, "fp8-rowwise"] == pytest.approx(compute[1, "fp8"])
    assert compute[2, "fp8"] < compute[2, "bf16"] < compute[2, "fp8-rowwise"]
    assert compute[2, "fp8-rowwise"] < 1.15 * compute[2, "bf16"]


def test_solve_costs_a_layout_with_block_recompute_as_given(tmp_path):
    """Megatron's --recompute-method block (``recompute_first``) in ``solve --layout``: nothing to search,
    the layout is costed as ``estimate`` costs it; one that does not fit is refused in one line."""
    args = ["--model", "llama3-8b", "--cluster", "dgx-h100-80gb:1", "--global-batch", "16", "--precision", "bf16",
            "--framework", "megatron", "--seq-len", "2048"]
    layout = "tp=1,pp=1,dp=8,mbs=1,zero=1,recompute_first=4"
    _, pred = estimate("llama3-8b", "dgx-h100-80gb:1", 16, layout, precision="bf16", framework="megatron",
                       seq_len=2048)
    out = run_cli("solve", *args, "--layout", layout, "--out", str(tmp_path / "p.json"))
    assert out.returncode == 0, out.stderr
    plan = Plan.load(tmp_path / "p.json")
    assert plan.solver.status == "given" and plan.predicted.step_time_s == pytest.approx(pred.step_time_s)
    big = run_cli("solve", *args, "--layout", layout.replace("mbs=1", "mbs=16"), "--out", str(tmp_path / "q.json"))
    assert big.returncode == 2 and big.stderr.startswith("error:") and len(big.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q.json").exists()
