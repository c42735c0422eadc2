"""``autoplan export``: each framework's own parser loads the exported file and reads back the plan.

For the issue's four plans (DDP, ZeRO-3, TP+SP+PP interleaved, the 175B catalogue plan) each
export is loaded by the framework's own code, so a renamed key fails here:

- DeepSpeed: ``deepspeed.runtime.config.DeepSpeedConfig`` (with its batch-size check against the
  data-parallel size);
- Megatron: megatron-core's ``TransformerConfig`` (its checks and its pipeline-layout parser),
  ``DistributedDataParallelConfig`` and micro-batch calculator, for the arguments Megatron-LM
  generates from those dataclasses; the few Megatron-LM training-loop arguments megatron-core does
  not have are checked against Megatron-LM's names (``MEGATRON_LM_ONLY``);
- torchtitan: ``ConfigManager.parse_args(["--job.config_file", FILE])`` (0.2.x, TOML), or for 0.3.x,
  which reads no TOML, its ``ParallelismConfig`` / ``TrainingConfig`` dataclasses;
- Accelerate: ``accelerate launch``'s own parser and launch-environment code, then the plugins
  (``FullyShardedDataParallelPlugin``, ``ParallelismConfig``, ``MegatronLMPlugin``) built from it.

A framework that is not installed is skipped with the reason (see the ``test`` extra in
pyproject.toml for which are).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tomllib
import types
from unittest import mock

import pytest

from autoplan.export import FRAMEWORKS, export_plan
from autoplan.export.common import ExportRefused
from autoplan.plan.plan import Plan
from export_plans import done_when_plans, plan_for

PLAN_NAMES = ["ddp", "zero3", "tp_sp_pp_interleaved", "gpt3_175b"]


def _write(tmp_path, plan: Plan, framework: str):
    exp = export_plan(plan, framework, "test")
    path = tmp_path / f"{framework}.{exp.format}"
    exp.save(path)
    return exp, path


def _blocks_per_stage(plan: Plan) -> list[int]:
    return [sum(n.startswith("block.") for n in st) for st in plan.layout.stages]


def _sharded(plan: Plan) -> bool:
    """autoplan runs data parallel sharded (FSDP2) unless it is plain DDP (ZeRO-0 without TP/PP)."""
    lay = plan.layout
    return lay.dp > 1 and not (lay.zero == 0 and lay.tp == 1 and lay.pp == 1)


def _warned(exp, *words: str) -> bool:
    return any(all(w in msg for w in words) for msg in exp.warnings)


# --------------------------------------------------------------------------------------------
# DeepSpeed
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PLAN_NAMES)
def test_deepspeed_config_round_trips(name, tmp_path, monkeypatch):
    dsc = pytest.importorskip("deepspeed.runtime.config", reason="deepspeed is not installed (pip install deepspeed)")
    plan = done_when_plans()[name]
    lay = plan.layout
    exp, path = _write(tmp_path, plan, "deepspeed")

    class DataParallelOnly:       # what DeepSpeed asks an mpu: the data-parallel size its batch check uses
        def get_data_parallel_world_size(self):
            return lay.dp
    monkeypatch.setattr(dsc.dist, "get_rank", lambda *a, **k: 0)   # no process group in this test
    cfg = dsc.DeepSpeedConfig(str(path), mpu=DataParallelOnly())
    # DeepSpeedConfig ignores top-level keys it does not know (and fills in a missing batch figure from
    # the others): every key must be one DeepSpeed's config code reads
    unknown = set(json.loads(path.read_text())) - _deepspeed_config_keys()
    assert not unknown, f"keys DeepSpeed's config code does not read: {unknown}"
    assert cfg.world_size == lay.dp
    assert cfg.train_batch_size == plan.training.global_batch == lay.global_batch
    assert cfg.train_micro_batch_size_per_gpu == lay.mbs
    assert cfg.gradient_accumulation_steps == lay.num_microbatches
    want_stage = 1 if (lay.zero == 0 and _sharded(plan)) else lay.zero
    assert cfg.zero_optimization_stage == want_stage
    if want_stage != lay.zero:
        assert _warned(exp, "zero=0", "ZeRO stage 1")
    assert max(cfg.tensor_parallel_config.autotp_size, 1) == lay.tp
    assert cfg.bfloat16_config.enabled == (plan.training.precision == "bf16")
    if lay.pp > 1:
        assert cfg.pipeline["stages"] == lay.pp
        full = cfg.pipeline["activation_checkpoint_interval"] == 1
    else:
        full = "activation_checkpointing" in cfg._param_dict
    assert full == (lay.recompute in ("full", "selective"))
    if lay.recompute == "selective":
        assert _warned(exp, "selective")
    if lay.vp > 1:
        assert _warned(exp, f"vp={lay.vp}")
    if lay.sp:
        assert _warned(exp, "sequence parallel")


def _deepspeed_config_keys() -> set[str]:
    """The top-level keys DeepSpeed's config code reads: its string constants and the string literals
    of the modules that parse the config."""
    import ast
    import inspect
    keys: set[str] = set()
    for name in ("deepspeed.runtime.constants", "deepspeed.runtime.zero.config",
                 "deepspeed.runtime.activation_checkpointing.config"):
        keys |= {v for v in vars(importlib.import_module(name)).values() if isinstance(v, str)}
    for name in ("deepspeed.runtime.config", "deepspeed.runtime.tensor_parallel.config"):
        tree = ast.parse(inspect.getsource(importlib.import_module(name)))
        keys |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return keys


def test_deepspeed_refuses_zero3_with_pipeline():
    plan = plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, "dp=4,pp=2,zero=3")
    with pytest.raises(ExportRefused, match="ZeRO stage 1 at most"):
        export_plan(plan, "deepspeed")


# --------------------------------------------------------------------------------------------
# Megatron (megatron-core's classes)
# --------------------------------------------------------------------------------------------

# Megatron-LM training-loop arguments that are not megatron-core dataclass fields, as named in
# Megatron-LM's megatron/training/arguments.py and megatron/training/config/ (commit d98e8a64).
MEGATRON_LM_ONLY = {"micro_batch_size", "global_batch_size", "seq_length", "max_position_embeddings",
                    "group_query_attention", "ckpt_format", "decoder_first_pipeline_num_layers",
                    "decoder_last_pipeline_num_layers", "num_layers_per_virtual_pipeline_stage"}
# what Megatron-LM's core_transformer_config_from_args renames on the way into TransformerConfig
MEGATRON_LM_RENAMES = {"decoder_first_pipeline_num_layers": "num_layers_in_first_pipeline_stage",
                       "decoder_last_pipeline_num_layers": "num_layers_in_last_pipeline_stage"}


def _parse_megatron_args(text: str) -> dict:
    toks = shlex.split(" ".join(l.rstrip().rstrip("\\") for l in text.splitlines() if not l.startswith("#")))
    out, i = {}, 0
    while i < len(toks):
        assert toks[i].startswith("--"), toks[i]
        dest = toks[i][2:].replace("-", "_")
        if i + 1 < len(toks) and not toks[i + 1].startswith("--"):
            v = toks[i + 1]
            out[dest] = int(v) if v.lstrip("-").isdigit() else v
            i += 2
        else:
            out[dest] = True
            i += 1
    return out


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_megatron_args_round_trip(name, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # megatron-core warns that Transformer Engine / Apex are absent
        tc = pytest.importorskip("megatron.core.transformer.transformer_config",
                                 reason="megatron-core is not installed (pip install megatron-core)")
        ddp_mod = importlib.import_module("megatron.core.distributed")
        calc_mod = importlib.import_module("megatron.core.num_microbatches_calculator")
    import torch
    plan = done_when_plans()[name]
    lay = plan.layout
    exp, path = _write(tmp_path, plan, "megatron")
    args = _parse_megatron_args(path.read_text())
    tf_fields = {f.name for f in dataclasses.fields(tc.TransformerConfig)}
    ddp_fields = {f.name for f in dataclasses.fields(ddp_mod.DistributedDataParallelConfig)}
    unknown = set(args) - tf_fields - ddp_fields - MEGATRON_LM_ONLY
    assert not unknown, f"arguments neither megatron-core fields nor Megatron-LM training arguments: {unknown}"
    kw = {d: v for d, v in args.items() if d in tf_fields}
    kw.update({MEGATRON_LM_RENAMES[d]: v for d, v in args.items() if d in MEGATRON_LM_RENAMES})
    if "num_layers_per_virtual_pipeline_stage" in args:
        kw["virtual_pipeline_model_parallel_size"] = (args["num_layers"] // args["pipeline_model_parallel_size"]
                                                      // args["num_layers_per_virtual_pipeline_stage"])
    if kw.get("pipeline_model_parallel_size", 1) > 1:
        kw["pipeline_dtype"] = torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = tc.TransformerConfig(**kw)
        ddp = ddp_mod.DistributedDataParallelConfig(**{d: v for d, v in args.items() if d in ddp_fields})
    assert cfg.tensor_model_parallel_size == lay.tp
    assert cfg.pipeline_model_parallel_size == lay.pp
    assert (cfg.virtual_pipeline_model_parallel_size or 1) == lay.vp
    assert cfg.sequence_parallel == bool(lay.sp)
    assert cfg.num_layers == plan.training.shape["layers"]
    want = {"none": (None, None, None), "selective": ("selective", None, None), "full": ("full", "uniform", 1)}
    assert (cfg.recompute_granularity, cfg.recompute_method, cfg.recompute_num_layers) == want[lay.recompute]
    # stages: Megatron's layout (chunk j on rank j mod pp), or its first/last split, or even
    blocks = _blocks_per_stage(plan)
    layout = cfg.pipeline_model_parallel_layout
    if layout is not None:
        got = [sum(t.name == "decoder" for t in layout.layout[j % lay.pp][j // lay.pp]) for j in range(lay.pp * lay.vp)]
        assert got == blocks
    elif cfg.num_layers_in_first_pipeline_stage is not None:
        assert [cfg.num_layers_in_first_pipeline_stage, cfg.num_layers_in_last_pipeline_stage] == [blocks[0], blocks[-1]]
    else:
        assert len(set(blocks)) == 1
    # batch: Megatron's own micro-batch count from global batch, micro batch and data-parallel size
    calc = calc_mod.ConstantNumMicroBatchesCalculator(args["global_batch_size"], args["micro_batch_size"], lay.dp,
                                                      False, 0)
    assert args["micro_batch_size"] == lay.mbs and calc.get() == lay.num_microbatches
    # data parallel sharding
    if lay.zero == 3:
        assert ddp.use_megatron_fsdp and ddp.data_parallel_sharding_strategy == "optim_grads_params"
    else:
        assert ddp.use_distributed_optimizer == _sharded(plan)
        assert not ddp.use_megatron_fsdp
    assert cfg.bf16 == (plan.training.precision == "bf16")


def test_megatron_per_block_recompute_uses_block_method():
    plan = plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, "dp=2,pp=4,mbs=1,zero=1")
    names = [n for st in plan.layout.stages for n in st if n.startswith("block.")]
    lay = plan.layout
    # the first two blocks of every stage recompute fully, the rest not at all
    firsts = {n for st in lay.stages for n in [x for x in st if x.startswith("block.")][:2]}
    plan.layout = lay.with_(recompute_layers={n: ("full" if n in firsts else "none") for n in names})
    exp = export_plan(plan, "megatron")
    assert exp.config["recompute_granularity"] == "full"
    assert exp.config["recompute_method"] == "block" and exp.config["recompute_num_layers"] == 2
    assert not exp.warnings
    # uneven counts per chunk: the most any chunk has, with a warning that names the counts
    firsts.discard(next(iter(sorted(firsts))))
    plan.layout = lay.with_(recompute_layers={n: ("full" if n in firsts else "none") for n in names})
    exp = export_plan(plan, "megatron")
    assert exp.config["recompute_num_layers"] == 2 and _warned(exp, "recomputes", "blocks per chunk")


# --------------------------------------------------------------------------------------------
# torchtitan
# --------------------------------------------------------------------------------------------

def _torchtitan_config_module():
    """torchtitan's config package without running ``torchtitan/__init__.py``, which in 0.2.x imports
    GPU kernels (triton) that a CPU machine does not have: the config code itself needs none."""
    spec = importlib.util.find_spec("torchtitan")
    if spec is None:
        pytest.skip("torchtitan is not installed (pip install --no-deps torchtitan tyro: its config code needs "
                    "only tyro, its other dependencies are large)")
    if "torchtitan" not in sys.modules:
        stub = types.ModuleType("torchtitan")
        stub.__path__ = list(spec.submodule_search_locations)
        stub.__spec__ = spec
        sys.modules["torchtitan"] = stub
    try:
        return importlib.import_module("torchtitan.config")
    except ImportError as e:
        pytest.skip(f"torchtitan's config code does not import here: {e}")


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_torchtitan_toml_round_trips(name, tmp_path):
    ttc = _torchtitan_config_module()
    plan = done_when_plans()[name]
    lay = plan.layout
    exp, path = _write(tmp_path, plan, "torchtitan")
    if importlib.util.find_spec("torchtitan.config.job_config") is not None:      # 0.2.x: TOML job configs
        job = ttc.ConfigManager().parse_args(["--job.config_file", str(path)])
        par, train, ac_mode = job.parallelism, job.training, job.activation_checkpoint.mode
    else:                                 # 0.3.x: no TOML; the sections are its config dataclasses
        sections = tomllib.loads(path.read_text())
        par = ttc.ParallelismConfig(**sections["parallelism"])
        train = ttc.TrainingConfig(**sections["training"])
        ac_mode = sections["activation_checkpoint"]["mode"]
    assert par.data_parallel_replicate_degree * par.data_parallel_shard_degree == lay.dp
    assert (par.data_parallel_shard_degree > 1) == _sharded(plan)
    if _sharded(plan):
        assert par.fsdp_reshard_after_forward == ("always" if lay.zero == 3 else "never")
    assert par.tensor_parallel_degree == lay.tp
    assert par.pipeline_parallel_degree == lay.pp
    assert train.global_batch_size == lay.global_batch
    if lay.pp > 1:
        assert par.pipeline_parallel_schedule == {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}[
            lay.schedule]
        assert train.local_batch_size // par.pipeline_parallel_microbatch_size == lay.num_microbatches
        assert par.pipeline_parallel_microbatch_size == lay.mbs
        parts = par.module_fqns_per_model_part
        assert len(parts) == lay.pp * lay.vp
        assert [sum(m.startswith("layers.") for m in part) for part in parts] == _blocks_per_stage(plan)
    else:
        assert train.local_batch_size == lay.mbs
        assert train.global_batch_size // (train.local_batch_size * lay.dp) == lay.num_microbatches
    assert train.seq_len == plan.training.seq_len
    assert ac_mode == lay.recompute


# --------------------------------------------------------------------------------------------
# Accelerate
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PLAN_NAMES)
def test_accelerate_config_round_trips(name, tmp_path):
    launch = pytest.importorskip("accelerate.commands.launch", reason="accelerate is not installed")
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import FullyShardedDataParallelPlugin, MegatronLMPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    plan = done_when_plans()[name]
    lay = plan.layout
    exp, path = _write(tmp_path, plan, "accelerate")
    args = launch.launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args = launch._validate_launch_command(args)[0]
    env = prepare_multi_gpu_env(args)
    assert args.num_processes == lay.world_size
    assert env["ACCELERATE_MIXED_PRECISION"] == {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}[plan.training.precision]
    with mock.patch.dict(os.environ, env, clear=True):
        if lay.pp > 1:
            assert args.use_megatron_lm
            mlm = MegatronLMPlugin()
            assert (mlm.tp_degree, mlm.pp_degree) == (lay.tp, lay.pp)
            assert mlm.num_micro_batches == lay.num_microbatches
            assert mlm.sequence_parallelism == bool(lay.sp)
            assert mlm.use_distributed_optimizer == _sharded(plan)
            assert mlm.recompute_activations == (lay.recompute != "none")
            if lay.recompute != "none":
                assert mlm.recompute_granularity == lay.recompute
            if lay.vp > 1:
                assert _warned(exp, f"vp={lay.vp}")
        elif not _sharded(plan) and lay.tp == 1:
            assert not args.use_fsdp and not args.use_megatron_lm    # plain DDP
        else:
            assert args.use_fsdp
            fsdp = FullyShardedDataParallelPlugin()
            par = ParallelismConfig()
            assert fsdp.fsdp_version == 2
            assert fsdp.reshard_after_forward == (lay.zero == 3)
            assert fsdp.activation_checkpointing == (lay.recompute != "none")
            assert par.dp_replicate_size * par.dp_shard_size == lay.dp and par.tp_size == lay.tp
    if lay.pp == 1:
        assert _warned(exp, f"gradient_accumulation_steps={lay.num_microbatches}")


# --------------------------------------------------------------------------------------------
# refusals, warnings and the command
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_export_refuses_units_out_of_chain_order(framework):
    plan = done_when_plans()["tp_sp_pp_interleaved"]
    stages = [list(st) for st in plan.layout.stages]
    stages[1][0], stages[2][0] = stages[2][0], stages[1][0]     # a placement that is not a chain of blocks
    bad = Plan(layout=plan.layout.with_(stages=stages), predicted=plan.predicted, solver=plan.solver,
               training=plan.training)
    with pytest.raises(ExportRefused, match="consecutive transformer blocks"):
        export_plan(bad, framework)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_export_warns_about_lossy_options(framework):
    plan = plan_for("gpt3-350m", "dgx-a100-80gb:2", 64, "dp=16,grad_compression=powersgd")
    exp = export_plan(plan, framework)
    assert _warned(exp, "powersgd", "exact gradient averaging")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoplan.cli", *args], capture_output=True, text=True, timeout=120)


def test_export_command_writes_file_warns_and_prints_json(tmp_path):
    plan = done_when_plans()["tp_sp_pp_interleaved"]
    plan_path = tmp_path / "plan.json"
    plan.save(plan_path)
    out = tmp_path / "ds.json"
    r = _cli("export", str(plan_path), "--to", "deepspeed", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["gradient_accumulation_steps"] == plan.layout.num_microbatches
    assert "warning:" in r.stderr and "vp=2" in r.stderr
    r = _cli("export", str(plan_path), "--to", "megatron", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["framework"] == "megatron" and d["config"]["tensor_model_parallel_size"] == 4
    assert d["text"].count("--") >= 5
    r = _cli("export", str(plan_path), "--to", "torchtitan")     # no --out: the file's text on stdout
    assert r.returncode == 0 and "[parallelism]" in r.stdout


def test_export_command_refusal_is_one_line_exit_2(tmp_path):
    plan = plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, "dp=4,pp=2,zero=3")
    plan_path = tmp_path / "plan.json"
    plan.save(plan_path)
    out = tmp_path / "ds.json"
    r = _cli("export", str(plan_path), "--to", "deepspeed", "--out", str(out))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: cannot export to DeepSpeed")
    assert not out.exists()
    r = _cli("export", str(plan_path), "--to", "nonsense")
    assert r.returncode == 2 and "error:" in r.stderr
