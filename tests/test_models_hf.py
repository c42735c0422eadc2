"""Real models through profile, solve and run: Hugging Face GPT-2 and Llama, and a user factory.

- the adapters (autoplan.models.hf) compute the HF model's logits with the same weights;
- ``hf:gpt2-tiny`` / ``hf:llama-tiny`` / ``examples/user_model.py:...`` are measured by
  ``profile_model``, planned by ``autoplan.plan.api`` (a fixed TP or PP layout, the rest solved), and
  the plan is run by ``autoplan.parallelize`` on 4 gloo processes, rebuilding the model from the
  plan alone; losses (SGD, fp32) and every gradient equal one process on the full batch.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")

from autoplan.errors import InputError, LayoutError  # noqa: E402
from autoplan.models.factory import build_factory_model  # noqa: E402
from autoplan.models.hf import build_hf_model, build_hf_reference, hf_config, hf_shape, reference_logits  # noqa: E402
from autoplan.models.registry import build_model_from_spec, unit_kinds  # noqa: E402
from autoplan.plan.api import solve  # noqa: E402
from autoplan.plan.plan import Plan  # noqa: E402
from autoplan.profile.formats import ModelProfile  # noqa: E402
from autoplan.profile.layers import profile_model  # noqa: E402
from tests.cli_utils import run_cli  # noqa: E402
from tests.dist_utils import train_reference  # noqa: E402
from tests.planner_instances import random_cluster  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
USER_MODEL = str(REPO / "examples" / "user_model.py")
GLOBAL_BATCH, STEPS, LR, SEED = 8, 3, 0.1, 0


# --- single process: the adapters against transformers ---------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("spec", ["hf:gpt2-tiny", "hf:llama-tiny", "hf:gpt2-tiny,scale_attn_by_inverse_layer_idx=true"])
def test_adapter_logits_equal_the_hf_model(spec: str) -> None:
    ref = build_hf_reference(spec, seed=7)
    model = build_hf_model(spec, seed=7)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in ref.parameters())
    tokens = torch.randint(model.vocab_size, (3, model.seq_len), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = reference_logits(ref, tokens)
        got = model(tokens)
    assert got.shape == (3, model.seq_len, model.vocab_size)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # stage by stage (as pipeline parallel runs it): same logits
    first, second = build_hf_model(spec, seed=7), build_hf_model(spec, seed=7)
    units = first.unit_names()
    first.keep_units(units[:3])
    second.keep_units(units[3:])
    with torch.no_grad():
        torch.testing.assert_close(second(first(tokens)), want, rtol=1e-5, atol=1e-6)
    # another seed gives other weights (the comparison above is not vacuous)
    with torch.no_grad():
        assert not torch.allclose(build_hf_model(spec, seed=8)(tokens), want)


@pytest.mark.timeout(60)
def test_gpt2_linear_conversion_matches_conv1d() -> None:
    ref = build_hf_reference("hf:gpt2-tiny", seed=3)
    model = build_hf_model("hf:gpt2-tiny", seed=3)
    hf_block, block = ref.transformer.h[1], model.blocks["1"]
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        q, k, v = ref.transformer.h[1].attn.c_attn(x).split(64, dim=2)
        torch.testing.assert_close(block.attn.q_proj(x), q)
        torch.testing.assert_close(block.attn.k_proj(x), k)
        torch.testing.assert_close(block.attn.v_proj(x), v)
        torch.testing.assert_close(block(x), hf_block(x), rtol=1e-5, atol=1e-6)


def test_specs_and_shapes() -> None:
    assert hf_shape("hf:llama-tiny").to_dict() == {"name": "hf:llama-tiny", "layers": 4, "hidden": 64, "heads": 4,
                                                    "kv_heads": 2, "ffn_hidden": 128, "vocab": 256, "seq_len": 32,
                                                    "mlp": "swiglu"}
    assert hf_shape("hf:gpt2-tiny").mlp == "gelu"
    assert hf_shape("hf:gpt2-tiny,layers=2,seq_len=16").layers == 2
    cfg = hf_config("hf:gpt2")
    assert (cfg.n_layer, cfg.n_embd, cfg.tie_word_embeddings) == (12, 768, False)
    assert build_hf_model("hf:llama-tiny,layers=2,kv_heads=1").unit_names() == ["embed", "block.0", "block.1", "head"]
    for bad in ("hf:bert", "hf:gpt2-tiny,nonsense=3", "hf:gpt2-tiny,layers"):
        with pytest.raises(InputError):
            hf_config(bad)
    with pytest.raises(InputError, match="not found"):
        build_model_from_spec("no/such/file.py:build")
    with pytest.raises(InputError, match="no function"):
        build_model_from_spec(f"{USER_MODEL}:nope")
    with pytest.raises(InputError, match="TP degree 3"):
        profile_model("hf:gpt2-tiny", tp_list=(3,))
    with pytest.raises(InputError, match="seq_len"):
        profile_model("hf:gpt2-tiny", seq_len=64)      # GPT-2 has 32 learned positions here
    with pytest.raises(InputError, match="TP degree 2"):
        profile_model(f"{USER_MODEL}:build_sequential", tp_list=(2,))   # no tp_plan


def test_factory_sequential_needs_seq_len(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch.nn as nn\ndef make():\n    return nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 8))\n")
    with pytest.raises(InputError, match="seq_len"):
        build_model_from_spec(f"{f}:make")
    f.write_text("def make():\n    return 3\n")
    with pytest.raises(InputError, match="not an nn.Module"):
        build_model_from_spec(f"{f}:make")


def test_factory_models_and_kinds() -> None:
    model = build_factory_model(f"{USER_MODEL}:build", seed=0)
    assert [(k.name, len(k.units), k.tp_shardable) for k in unit_kinds(model)] == \
        [("embed", 1, False), ("block", 4, True), ("head", 1, False)]
    seq = build_factory_model(f"{USER_MODEL}:build_sequential", seed=0)
    assert seq.unit_names() == [f"block.{i}" for i in range(6)]
    # embedding, 4 identical MLP blocks, head: three kinds, none TP-shardable (no tp_plan)
    assert [(k.name, k.units, k.tp_shardable) for k in unit_kinds(seq)] == \
        [("block", ("block.0",), False), ("block_1", ("block.1", "block.2", "block.3", "block.4"), False),
         ("block_2", ("block.5",), False)]
    # same seed, same weights; the two factories build the same computation
    torch.testing.assert_close(seq(torch.arange(16)[None]), model(torch.arange(16)[None]))


# --- profile -> solve -> run on 4 processes -----------------------------------------------------

def _cluster_json(tmp_path: Path) -> str:
    cl = random_cluster(random.Random(3), world=4, memory_bytes=4 << 30)
    path = tmp_path / "cluster.json"
    cl.save(path)
    return str(path)


def _profile_json(spec: str, tmp_path: Path, tp_list: tuple[int, ...]) -> str:
    prof = profile_model(spec, mbs_list=(1,), tp_list=tp_list, warmup=0, repeats=1, threads=1,
                         optimizer_min_params=10_000)
    assert prof.model_spec == spec
    shardable = [k for k in prof.kinds.values() if k.tp_shardable]
    assert sorted({t.tp for k in shardable for t in k.timings}) == sorted(tp_list if shardable else [])
    if spec.startswith("hf:"):
        assert set(prof.kinds) == {"embed", "block", "head"} and prof.shape["layers"] == 4
    path = tmp_path / (spec.replace(":", "_").replace("/", "_") + ".json")
    prof.save(path)
    assert ModelProfile.load(path).to_dict() == prof.to_dict()
    return str(path)


def _plans(model_json: str, cluster_json: str, layouts: list[str]) -> list[dict]:
    plans = []
    for fixed in layouts:
        plan = solve(model_json, cluster_json, GLOBAL_BATCH, layout=fixed, optimizer="sgd")
        assert plan.layout.world_size == 4
        plans.append(plan.to_dict())
    return plans


def _reference(spec: str) -> tuple[list[float], dict[str, torch.Tensor]]:
    """One process, the full batch, SGD: (losses, gradients of step 0)."""
    from autoplan.models.registry import model_vocab

    model = build_model_from_spec(spec, None, SEED)
    return train_reference(model, vocab=model_vocab(model), seq_len=model.seq_len, global_batch=GLOBAL_BATCH,
                           steps=STEPS, lr=LR, seed=SEED)


def _run_plans(rank: int, world: int, plans: list[dict]) -> list[tuple[list[float], dict[str, Any]]]:
    """Each plan: rebuild its model from the plan alone, lay it out, train STEPS SGD steps."""
    import autoplan
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.registry import build_model_from_spec, model_vocab

    out = []
    for d in plans:
        plan = Plan.from_dict(d)
        model = build_model_from_spec(plan.training.model_spec, plan.training.shape, seed=SEED)
        par = autoplan.parallelize(model, plan)
        opt = torch.optim.SGD(par.parameters(), lr=LR)
        losses, grads = [], {}
        for step in range(STEPS):
            tokens, labels = synthetic_batch(step, plan.layout.global_batch, plan.training.seq_len,
                                             model_vocab(model), SEED)
            losses.append(par.step(par.batch_slice(tokens), par.batch_slice(labels)))
            if step == 0:
                grads = par.full_gradients()
            opt.step()
            opt.zero_grad()
        out.append((losses, grads))
    return out


def _check(spec: str, plans: list[dict], per_rank: list[list[tuple[list[float], dict]]]) -> None:
    ref_losses, ref_grads = _reference(spec)
    for i, d in enumerate(plans):
        seen: set[str] = set()
        what = f"{spec} {Plan.from_dict(d).layout.short()}"
        for rank, results in enumerate(per_rank):
            losses, grads = results[i]
            for step, (a, b) in enumerate(zip(losses, ref_losses, strict=True)):
                assert abs(a - b) <= 1e-5 * abs(b), f"{what} rank {rank} step {step}: loss {a} != {b}"
            for name, g in grads.items():
                torch.testing.assert_close(g, ref_grads[name], rtol=1e-4, atol=1e-6,
                                           msg=lambda m, n=name: f"{what} rank {rank} grad {n}: {m}")
                seen.add(name)
        assert seen == set(ref_grads), f"{what}: no rank holds gradients of {sorted(set(ref_grads) - seen)}"


CASES: list[tuple[str, tuple[int, ...], list[str]]] = [
    # (spec, TP degrees profiled, layouts fixed for the solver: the rest is solved)
    ("hf:gpt2-tiny", (1, 2), ["tp=2,dp=2,sp=1", "pp=2,dp=2,schedule=1f1b,recompute=full"]),
    ("hf:llama-tiny", (1, 2), ["tp=2,pp=2,sp=0", "pp=4,schedule=gpipe,recompute=selective"]),
    (f"{USER_MODEL}:build", (1, 2), ["tp=2,dp=2"]),
    (f"{USER_MODEL}:build_sequential", (1,), ["pp=2,dp=2"]),
]


def _profiles_and_plans(tmp: Path) -> tuple[list[dict]]:
    """Profile and plan every case, in this process: the arguments of the 4-process job, all plans in CASES' order."""
    cluster = _cluster_json(tmp)
    return ([d for spec, tps, layouts in CASES for d in _plans(_profile_json(spec, tmp, tps), cluster, layouts)],)


SHARED_JOBS = {"plans": (4, _run_plans, _profiles_and_plans, 150)}
"""every plan runs in the session's 4-process job (tests/conftest.py): process start-up, with torch and
transformers imports, is most of the cost"""


@pytest.fixture(scope="module")
def runs(shared_jobs) -> dict[str, tuple[list[dict], list[list[tuple]]]]:
    """spec -> (its plans, per-rank results of each)."""
    (flat,) = shared_jobs.args(__name__, "plans")
    per_rank = shared_jobs.get(__name__, "plans")
    out, i = {}, 0
    for spec, _, layouts in CASES:
        n = len(layouts)
        out[spec] = (flat[i:i + n], [r[i:i + n] for r in per_rank])
        i += n
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("spec", ["hf:gpt2-tiny", "hf:llama-tiny"])
def test_hf_model_profile_solve_run(spec: str, runs) -> None:
    plans, per_rank = runs[spec]
    for d in plans:
        assert d["training"]["model_spec"] == spec and d["training"]["shape"]["heads"] == 4
    layouts = [Plan.from_dict(d).layout for d in plans]
    assert layouts[0].tp == 2 and any(lay.pp > 1 for lay in layouts)
    _check(spec, plans, per_rank)


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("name", ["build", "build_sequential"])
def test_factory_model_profile_solve_run(name: str, runs) -> None:
    spec = f"{USER_MODEL}:{name}"
    plans, per_rank = runs[spec]
    if name == "build_sequential":
        assert plans[0]["training"]["shape"] is None and plans[0]["layout"]["pp"] == 2
    else:
        assert plans[0]["layout"]["tp"] == 2 and plans[0]["layout"]["dp"] == 2
    _check(spec, plans, per_rank)


@pytest.mark.timeout(120)
def test_cli_solves_from_a_measured_hf_profile(tmp_path: Path) -> None:
    """``autoplan solve --model <profile of hf:gpt2-tiny>``: the plan records the hf spec and its units."""
    out = tmp_path / "plan.json"
    model_json = _profile_json("hf:gpt2-tiny", tmp_path, (1, 2))
    r = run_cli("solve", "--model", model_json, "--cluster", _cluster_json(tmp_path), "--global-batch", "8",
                "--layout", "tp=2,pp=2", "--out", str(out), "--json")      # in this process
    assert r.returncode == 0, r.stderr
    plan = Plan.load(out)
    assert plan.training.model_spec == "hf:gpt2-tiny" and plan.training.shape["hidden"] == 64
    assert (plan.layout.tp, plan.layout.pp) == (2, 2)
    assert [n for st in plan.layout.stages for n in st] == build_hf_model("hf:gpt2-tiny").unit_names()
    # a factory file that does not exist: one error line, exit code 2, no traceback (a real process)
    bad = subprocess.run([sys.executable, "-m", "autoplan.cli", "solve", "--model", str(tmp_path / "missing.py:f"),
                          "--cluster", _cluster_json(tmp_path), "--global-batch", "8"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "not found" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.timeout(60)
def test_hf_spec_on_catalogue_hardware_is_planned_analytically() -> None:
    """A catalogue cluster: ``hf:`` specs get the analytic profile of their shape, named by the
    adapter's units; a factory model has none (it must be measured on the target device)."""
    plan = solve("hf:llama-tiny", "dgx-a100-80gb:1", 16, layout="tp=2,pp=2")
    assert plan.training.model_spec == "hf:llama-tiny" and plan.training.shape["kv_heads"] == 2
    assert [n for st in plan.layout.stages for n in st] == build_hf_model("hf:llama-tiny").unit_names()
    with pytest.raises(LayoutError, match="does not divide the 2 key/value heads"):
        solve("hf:llama-tiny", "dgx-a100-80gb:1", 16, layout="tp=4,pp=2")
    with pytest.raises(InputError, match="measure it on the target device"):
        solve(f"{USER_MODEL}:build", "dgx-a100-80gb:1", 16)
