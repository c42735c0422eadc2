"""``autoplan export``: each framework's own code runs on the exported file and the test reads back
what that framework would actually do (the effective configuration), for DDP, ZeRO-3, TP+SP+PP
interleaved, a Llama plan (SwiGLU, GQA) and the 175B catalogue plan:

- Megatron-LM: the command's arguments go into megatron-core's ``TransformerConfig``,
  ``DistributedDataParallelConfig``, ``OptimizerConfig``, ``GPTModel``'s signature, its
  ``NullTokenizer`` and micro-batch calculator, the way Megatron-LM's
  ``core_transformer_config_from_args`` maps them (Megatron-LM's own argument parser,
  ``megatron/training/arguments.py``, is not in any package on PyPI); the launch line goes through
  torchrun's own parser;
- Accelerate: ``accelerate launch``'s parser and launch-environment code on the file, then
  ``MegatronLMPlugin`` (with the header's ``other_megatron_args`` and Accelerate's own Hugging Face
  config reader) -> the Megatron arguments it would pass, loaded into megatron-core as above; or the
  FSDP2 / parallelism plugins;
- DeepSpeed: ``DeepSpeedConfig`` (with its batch check against the data-parallel size), the keys its
  config and pipeline-engine code read, the pipeline engine's ZeRO assertion, AutoTP's mesh, and the
  ``deepspeed`` launcher's parser;
- torchtitan 0.3: its ``ConfigManager`` on the command line (registry model, overrides,
  ``Trainer.Config`` checks), ``ParallelDims`` on the world size torchrun's parser gives.

All four are in the ``test`` extra (pyproject.toml), so none of these is skipped in CI.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import os
import re
import shlex
import tomllib
import types
import warnings
from functools import lru_cache
from unittest import mock

import pytest

from autoplan.export import FRAMEWORKS, export_plan
from autoplan.export.common import ExportRefused, model_shape
from autoplan.plan.plan import Plan
from cli_utils import run_cli
from export_plans import done_when_plans, llama_layout_plans, plan_for

PLAN_NAMES = ["ddp", "zero3", "tp_sp_pp_interleaved", "llama3_8b", "gpt3_175b"]


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


def _nodes(plan: Plan) -> int:
    return int(plan.training.cluster_spec.rsplit(":", 1)[1])


def _launch_env(launch: str) -> tuple[dict, list[str]]:
    """A launch line's leading ``NAME=value`` settings, and the command's words."""
    toks = shlex.split(launch.replace("$MASTER_ADDR", "127.0.0.1").replace("$NODE_RANK", "0"))
    env = {}
    while "=" in toks[0]:
        k, v = toks.pop(0).split("=", 1)
        env[k] = v
    return env, toks


def _assert_megatron_env(plan: Plan, launch: str, megatron_fsdp: bool) -> None:
    """Megatron-LM's start-up check (validate_args): TP or CP without Megatron-FSDP needs
    CUDA_DEVICE_MAX_CONNECTIONS=1 (before Blackwell); Megatron-FSDP needs it not to be 1."""
    env = _launch_env(launch)[0]
    tp_or_cp = plan.layout.tp > 1 or getattr(plan.layout, "cp", 1) > 1
    assert (env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1") == (tp_or_cp and not megatron_fsdp)


def _torchrun(launch: str) -> tuple[types.SimpleNamespace, list[str]]:
    """torchrun's own parser on an export's launch line: (its arguments, the script's arguments)."""
    from torch.distributed.run import get_args_parser
    toks = _launch_env(launch)[1]
    assert toks[0] == "torchrun"
    args = get_args_parser().parse_args(toks[1:])
    return args, args.training_script_args


def _check_world(plan: Plan, launch: str) -> types.SimpleNamespace:
    args, _ = _torchrun(launch)
    assert int(args.nnodes) == _nodes(plan)
    assert int(args.nnodes) * int(args.nproc_per_node) == plan.layout.world_size
    return args


# --------------------------------------------------------------------------------------------
# Megatron (megatron-core's classes)
# --------------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _mcore() -> types.SimpleNamespace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # megatron-core warns that Transformer Engine / Apex are absent
        return types.SimpleNamespace(
            tc=importlib.import_module("megatron.core.transformer.transformer_config"),
            ddp=importlib.import_module("megatron.core.distributed"),
            opt=importlib.import_module("megatron.core.optimizer.optimizer_config"),
            gpt=importlib.import_module("megatron.core.models.gpt.gpt_model"),
            calc=importlib.import_module("megatron.core.num_microbatches_calculator"),
            tok=importlib.import_module("megatron.core.tokenizers.text.libraries.null_tokenizer"))


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


# Megatron-LM arguments that are no megatron-core dataclass field or GPTModel parameter, as named in
# Megatron-LM's megatron/training/arguments.py: the training loop's, and the model switches that
# core_transformer_config_from_args turns into TransformerConfig fields (LM_TO_CORE below)
MEGATRON_LM_ONLY = {"micro_batch_size", "global_batch_size", "seq_length", "max_position_embeddings",
                    "group_query_attention", "ckpt_format", "decoder_first_pipeline_num_layers",
                    "decoder_last_pipeline_num_layers", "num_layers_per_virtual_pipeline_stage", "swiglu",
                    "disable_bias_linear", "norm_epsilon", "untie_embeddings_and_output_weights", "tokenizer_type",
                    "vocab_size", "make_vocab_size_divisible_by", "no_gradient_accumulation_fusion"}


def _lm_to_core(args: dict, flags: bool) -> dict:
    """What Megatron-LM's core_transformer_config_from_args makes of the model switches; ``flags``:
    ``args`` are command-line flags (``--disable-bias-linear`` sets ``add_bias_linear`` False), else
    the attributes Megatron's parser sets (what Accelerate's plugin sets directly)."""
    import torch.nn.functional as F
    kw: dict = {}
    if args.get("swiglu"):
        kw.update(gated_linear_unit=True, activation_func=F.silu)
    if flags and args.get("disable_bias_linear"):
        kw["add_bias_linear"] = False
    if "norm_epsilon" in args:
        kw["layernorm_epsilon"] = args["norm_epsilon"]
    if flags and args.get("no_gradient_accumulation_fusion"):
        kw["gradient_accumulation_fusion"] = False
    for lm, core in (("decoder_first_pipeline_num_layers", "num_layers_in_first_pipeline_stage"),
                     ("decoder_last_pipeline_num_layers", "num_layers_in_last_pipeline_stage")):
        if args.get(lm) is not None:
            kw[core] = args[lm]
    if args.get("num_layers_per_virtual_pipeline_stage"):
        kw["virtual_pipeline_model_parallel_size"] = (args["num_layers"] // args["pipeline_model_parallel_size"]
                                                      // args["num_layers_per_virtual_pipeline_stage"])
    return kw


def _padded_vocab(args: dict) -> int:
    """Megatron-LM's vocabulary: the tokenizer's size padded to make_vocab_size_divisible_by * tp."""
    size = _mcore().tok.NullTokenizer(args["vocab_size"]).vocab_size
    multiple = args.get("make_vocab_size_divisible_by", 128) * args["tensor_model_parallel_size"]
    return -(-size // multiple) * multiple


def _megatron_effective(args: dict, flags: bool = True) -> types.SimpleNamespace:
    """megatron-core's config objects for Megatron-LM arguments ``{name: value}`` (see :func:`_lm_to_core`)."""
    import torch
    m = _mcore()
    tf = _fields(m.tc.TransformerConfig)
    kw = {d: v for d, v in args.items() if d in tf and d != "attention_backend"}
    kw.update(_lm_to_core(args, flags))
    if kw.get("pipeline_model_parallel_size", 1) > 1:
        kw["pipeline_dtype"] = torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = m.tc.TransformerConfig(**kw)
        ddp = m.ddp.DistributedDataParallelConfig(**{d: v for d, v in args.items()
                                                     if d in _fields(m.ddp.DistributedDataParallelConfig)})
        opt = m.opt.OptimizerConfig(**{d: v for d, v in args.items() if d in ("optimizer", "clip_grad")})
    model = inspect.signature(m.gpt.GPTModel.__init__).bind_partial(
        None, config=cfg, transformer_layer_spec=None, vocab_size=_padded_vocab(args) if "vocab_size" in args else None,
        max_sequence_length=args["seq_length"],
        position_embedding_type=args.get("position_embedding_type", "learned_absolute"),
        share_embeddings_and_output_weights=not args.get("untie_embeddings_and_output_weights", False)).arguments
    return types.SimpleNamespace(cfg=cfg, ddp=ddp, opt=opt, model=model)


def _assert_megatron_runs_plan(plan: Plan, args: dict, eff: types.SimpleNamespace, *, model_vocab: bool = True):
    """Degrees, batch, recompute, SP/CP, precision, model (MLP kind, GQA, norm, biases, head, vocab)
    and layer placement as megatron-core holds them."""
    import torch.nn.functional as F
    lay, cfg, sh = plan.layout, eff.cfg, model_shape(plan)
    assert cfg.tensor_model_parallel_size == lay.tp and cfg.pipeline_model_parallel_size == lay.pp
    assert cfg.context_parallel_size == getattr(lay, "cp", 1)
    assert (cfg.virtual_pipeline_model_parallel_size or 1) == lay.vp
    assert cfg.sequence_parallel == bool(lay.sp)
    assert (cfg.num_layers, cfg.hidden_size, cfg.ffn_hidden_size, cfg.num_attention_heads) == \
        (sh.layers, sh.hidden, sh.ffn_hidden, sh.heads)
    assert cfg.num_query_groups == sh.kv_heads
    assert cfg.gated_linear_unit == (sh.mlp == "swiglu")
    assert cfg.activation_func is (F.silu if sh.mlp == "swiglu" else F.gelu)
    assert cfg.normalization == "RMSNorm" and not cfg.add_bias_linear
    assert cfg.hidden_dropout == cfg.attention_dropout == 0.0
    assert eff.model["share_embeddings_and_output_weights"] is False       # autoplan counts an untied head
    assert eff.model["position_embedding_type"] == "rope"
    if model_vocab:
        assert eff.model["vocab_size"] == sh.vocab
    want = {"none": (None, None, None), "selective": ("selective", None, None), "full": ("full", "uniform", 1)}
    assert (cfg.recompute_granularity, cfg.recompute_method, cfg.recompute_num_layers) == want[lay.recompute]
    blocks = _blocks_per_stage(plan)
    layout = cfg.pipeline_model_parallel_layout
    if layout is not None:
        got = [sum(t.name == "decoder" for t in layout.layout[j % lay.pp][j // lay.pp]) for j in range(lay.pp * lay.vp)]
        assert got == blocks
    elif cfg.num_layers_in_first_pipeline_stage is not None:
        assert [cfg.num_layers_in_first_pipeline_stage, cfg.num_layers_in_last_pipeline_stage] == \
            [blocks[0], blocks[-1]]
    else:
        assert len(set(blocks)) == 1
    # Megatron's own micro-batch count from global batch, micro batch and data-parallel size (world / (tp*pp))
    calc = _mcore().calc.ConstantNumMicroBatchesCalculator(args["global_batch_size"], args["micro_batch_size"],
                                                           lay.dp, False, 0)
    assert args["micro_batch_size"] == lay.mbs and calc.get() == lay.num_microbatches
    if lay.zero == 3 and lay.dp > 1:
        assert eff.ddp.use_megatron_fsdp and eff.ddp.data_parallel_sharding_strategy == "optim_grads_params"
        assert eff.ddp.use_distributed_optimizer and args.get("ckpt_format") == "fsdp_dtensor"   # validate_args
    else:
        assert eff.ddp.use_distributed_optimizer == _sharded(plan) and not eff.ddp.use_megatron_fsdp
    assert cfg.bf16 == (plan.training.precision == "bf16")
    assert eff.opt.optimizer == "adam" and eff.opt.clip_grad == 1.0


def _parse_megatron_command(text: str) -> tuple[str, dict]:
    """The export's shell command: (the launch part up to pretrain_gpt.py, {dest: value})."""
    toks = shlex.split(" ".join(l.rstrip().rstrip("\\") for l in text.splitlines() if not l.startswith("#")),
                       posix=True)
    i = toks.index("pretrain_gpt.py")
    out, rest = {}, toks[i + 1:]
    j = 0
    while j < len(rest):
        assert rest[j].startswith("--"), rest[j]
        dest = rest[j][2:].replace("-", "_")
        if j + 1 < len(rest) and not rest[j + 1].startswith("--"):
            v = rest[j + 1]
            out[dest] = int(v) if v.lstrip("-").isdigit() else float(v) if re.fullmatch(r"[0-9.e+-]+", v) else v
            j += 2
        else:
            out[dest] = True
            j += 1
    return " ".join(toks[:i + 1]), out


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_megatron_command_runs_as_planned(name, tmp_path):
    m = _mcore()
    plan = done_when_plans()[name]
    exp, path = _write(tmp_path, plan, "megatron")
    launch, args = _parse_megatron_command(path.read_text())
    assert launch == exp.launch
    _check_world(plan, launch)
    known = (_fields(m.tc.TransformerConfig) | _fields(m.ddp.DistributedDataParallelConfig) |
             _fields(m.opt.OptimizerConfig) | set(inspect.signature(m.gpt.GPTModel.__init__).parameters))
    unknown = set(args) - known - MEGATRON_LM_ONLY
    assert not unknown, f"arguments neither megatron-core fields nor Megatron-LM training arguments: {unknown}"
    eff = _megatron_effective(args)
    _assert_megatron_runs_plan(plan, args, eff)
    _assert_megatron_env(plan, launch, eff.ddp.use_megatron_fsdp)
    assert _warned(exp, "costed for --framework autoplan")


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
    assert not _warned(exp, "recompute")
    # uneven counts per chunk: the most any chunk has, with a warning that names the counts
    firsts.discard(next(iter(sorted(firsts))))
    plan.layout = lay.with_(recompute_layers={n: ("full" if n in firsts else "none") for n in names})
    exp = export_plan(plan, "megatron")
    assert exp.config["recompute_num_layers"] == 2 and _warned(exp, "recomputes", "blocks per chunk")


# --------------------------------------------------------------------------------------------
# Accelerate (launch parser, plugins, and the Megatron arguments its plugin passes)
# --------------------------------------------------------------------------------------------

def _hf_model_for(plan: Plan) -> types.SimpleNamespace:
    """What Accelerate's Megatron-LM plugin reads the network size from: a Hugging Face config of the
    plan's shape (GPT-2 for GeLU shapes, Llama for SwiGLU), as the training script's model has."""
    import transformers
    sh = model_shape(plan)
    if sh.mlp == "swiglu":
        cfg = transformers.LlamaConfig(num_hidden_layers=sh.layers, hidden_size=sh.hidden,
                                       num_attention_heads=sh.heads, num_key_value_heads=sh.kv_heads,
                                       intermediate_size=sh.ffn_hidden, vocab_size=sh.vocab,
                                       max_position_embeddings=plan.training.seq_len, tie_word_embeddings=False)
    else:
        cfg = transformers.GPT2Config(n_layer=sh.layers, n_embd=sh.hidden, n_head=sh.heads, vocab_size=sh.vocab,
                                      n_positions=plan.training.seq_len, tie_word_embeddings=False)
    return types.SimpleNamespace(config=cfg)


ACCELERATE_PLANS = PLAN_NAMES + ["llama_tp_sp_pp_interleaved"]


@pytest.mark.parametrize("name", ACCELERATE_PLANS)
def test_accelerate_runs_as_planned(name, tmp_path):
    from accelerate.commands import launch
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import FullyShardedDataParallelPlugin, MegatronLMPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    plan = done_when_plans()[name] if name in done_when_plans() else llama_layout_plans()["tp_sp_pp_interleaved"]
    lay = plan.layout
    if lay.pp > 1 and lay.cp > 1:    # the plugin derives dp = world / (tp * pp): refused by name
        with pytest.raises(ExportRefused, match="cp="):
            export_plan(plan, "accelerate")
        return
    exp, path = _write(tmp_path, plan, "accelerate")
    toks = _launch_env(exp.launch.replace("THIS_FILE", str(path)))[1]
    assert toks[:2] == ["accelerate", "launch"]
    args = launch._validate_launch_command(launch.launch_command_parser().parse_args(toks[2:]))[0]
    env = prepare_multi_gpu_env(args)
    assert args.num_processes == lay.world_size and args.num_machines == _nodes(plan)
    assert env["ACCELERATE_MIXED_PRECISION"] == {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}[plan.training.precision]
    with mock.patch.dict(os.environ, env, clear=True):
        if lay.pp > 1:
            assert args.use_megatron_lm
            line = next(l for l in path.read_text().splitlines() if "other_megatron_args=" in l)
            extra = ast.literal_eval(line.split("other_megatron_args=", 1)[1][:-1])
            mlm = MegatronLMPlugin(other_megatron_args=extra)
            # what Accelerator.prepare does before starting Megatron: the network size from the
            # script's Hugging Face model, the batch from its DataLoader, dp = world / (tp * pp)
            mlm.set_network_size_args(_hf_model_for(plan))
            mlm.set_training_args(lay.mbs, lay.world_size // (mlm.tp_degree * mlm.pp_degree))
            mlm.set_mixed_precision(plan.training.precision)
            margs = dict(mlm.megatron_lm_default_args)
            assert margs["global_batch_size"] == lay.global_batch
            margs.setdefault("optimizer", "adam")           # set from the script's torch optimizer (AdamW)
            _assert_megatron_runs_plan(plan, margs, _megatron_effective(margs, flags=False), model_vocab=False)
            _assert_megatron_env(plan, exp.launch, False)
        elif not _sharded(plan) and lay.tp == 1:
            assert not args.use_fsdp and not args.use_megatron_lm    # plain DDP
        else:
            assert args.use_fsdp
            fsdp = FullyShardedDataParallelPlugin()
            par = ParallelismConfig()
            assert fsdp.fsdp_version == 2
            assert fsdp.reshard_after_forward == (lay.zero == 3)
            assert fsdp.auto_wrap_policy is not None and fsdp.transformer_cls_names_to_wrap == ["Block"]
            assert fsdp.activation_checkpointing == (lay.recompute != "none")
            assert par.dp_replicate_size * par.dp_shard_size == lay.dp and par.tp_size == lay.tp
            assert par.cp_size == getattr(lay, "cp", 1)
    if lay.pp == 1:
        assert _warned(exp, f"gradient_accumulation_steps={lay.num_microbatches}", f"per-device batch of {lay.mbs}")


# --------------------------------------------------------------------------------------------
# DeepSpeed
# --------------------------------------------------------------------------------------------

DEEPSPEED_PLANS = PLAN_NAMES + ["pp_zero1"]


def _deepspeed_plan(name: str) -> Plan:
    if name == "pp_zero1":      # DeepSpeed's own pipeline engine: PP without TP, ZeRO-1, full recompute
        return plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, "dp=4,pp=2,zero=1,recompute=full,mbs=2")
    return done_when_plans()[name]


@lru_cache(maxsize=None)
def _deepspeed_config_keys() -> tuple[frozenset, frozenset]:
    """The top-level keys DeepSpeed's config code reads (its string constants and the string literals of
    the modules that parse the config), and the ``pipeline`` keys its pipeline engine reads."""
    keys: set[str] = set()
    for name in ("deepspeed.runtime.constants", "deepspeed.runtime.zero.config",
                 "deepspeed.runtime.activation_checkpointing.config"):
        keys |= {v for v in vars(importlib.import_module(name)).values() if isinstance(v, str)}
    for name in ("deepspeed.runtime.config", "deepspeed.runtime.tensor_parallel.config"):
        tree = ast.parse(inspect.getsource(importlib.import_module(name)))
        keys |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    engine = inspect.getsource(importlib.import_module("deepspeed.runtime.pipe.engine"))
    return frozenset(keys), frozenset(re.findall(r"pipeline\['(\w+)'\]", engine))


@pytest.mark.parametrize("name", DEEPSPEED_PLANS)
def test_deepspeed_runs_as_planned(name, tmp_path, monkeypatch):
    dsc = importlib.import_module("deepspeed.runtime.config")
    from deepspeed.launcher.runner import parse_args as deepspeed_launcher_args
    from deepspeed.runtime.zero.config import ZeroStageEnum
    plan = _deepspeed_plan(name)
    lay = plan.layout
    if lay.tp > 1 and lay.pp > 1:
        # AutoTP's device mesh is (data_parallel, tensor_parallel): no pipeline axis to put stages on
        mesh = inspect.getsource(importlib.import_module("deepspeed.utils.groups")._init_tp_mesh_device)
        assert '("data_parallel", "tensor_parallel")' in mesh and "pipe" not in mesh
        with pytest.raises(ExportRefused, match="AutoTP .* no pipeline axis"):
            export_plan(plan, "deepspeed")
        return
    exp, path = _write(tmp_path, plan, "deepspeed")

    class DataParallelOnly:       # what DeepSpeed asks an mpu: the data-parallel size its batch check uses
        def get_data_parallel_world_size(self):
            return lay.dp
    monkeypatch.setattr(dsc.dist, "get_rank", lambda *a, **k: 0)   # no process group in this test
    cfg = dsc.DeepSpeedConfig(str(path), mpu=DataParallelOnly())
    raw = json.loads(path.read_text())
    top_keys, pipeline_keys = _deepspeed_config_keys()
    assert not set(raw) - top_keys, f"keys DeepSpeed's config code does not read: {set(raw) - top_keys}"
    assert not set(raw.get("pipeline", {})) - pipeline_keys, "pipeline keys DeepSpeed's pipeline engine never reads"
    assert cfg.world_size == lay.dp
    assert cfg.train_batch_size == plan.training.global_batch == lay.global_batch
    assert cfg.train_micro_batch_size_per_gpu == lay.mbs
    assert cfg.gradient_accumulation_steps == lay.num_microbatches
    want_stage = 1 if (lay.zero == 0 and _sharded(plan)) else lay.zero
    assert cfg.zero_optimization_stage == want_stage
    assert max(cfg.tensor_parallel_config.autotp_size, 1) == lay.tp
    assert cfg.bfloat16_config.enabled == (plan.training.precision == "bf16")
    assert cfg.optimizer_name == "adamw" and cfg.gradient_clipping == 1.0
    if lay.pp > 1:
        assert cfg.zero_optimization_stage < ZeroStageEnum.gradients      # PipelineEngine's assertion
        full = cfg.pipeline["activation_checkpoint_interval"] == 1
        assert _warned(exp, f"PipelineModule(num_stages={lay.pp}")
    else:
        full = "activation_checkpointing" in cfg._param_dict
    assert full == (lay.recompute in ("full", "selective"))
    if lay.recompute == "selective":
        assert _warned(exp, "selective")
    if lay.sp:
        assert _warned(exp, "sequence parallel")
    launcher = deepspeed_launcher_args(shlex.split(exp.launch.replace("THIS_FILE", str(path))[len("deepspeed "):]))
    assert launcher.num_nodes == _nodes(plan) and launcher.num_nodes * launcher.num_gpus == lay.world_size
    assert launcher.user_args[-1] == str(path)


def test_deepspeed_refuses_zero3_with_pipeline():
    plan = plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, "dp=4,pp=2,zero=3")
    with pytest.raises(ExportRefused, match="ZeRO stage 1 at most"):
        export_plan(plan, "deepspeed")


# --------------------------------------------------------------------------------------------
# torchtitan 0.3 (its config manager on the command line)
# --------------------------------------------------------------------------------------------

TORCHTITAN_PLANS = PLAN_NAMES + [f"llama_{n}" for n in ("ddp", "zero3", "tp_sp_pp_interleaved")]


@lru_cache(maxsize=None)
def _torchtitan() -> types.SimpleNamespace:
    # importing torchtitan's registry sets PYTORCH_CUDA_ALLOC_CONF; keep the other tests' environment
    with warnings.catch_warnings(), mock.patch.dict(os.environ):
        warnings.simplefilter("ignore")
        importlib.import_module("torchtitan.models.llama3.config_registry")
        return types.SimpleNamespace(config=importlib.import_module("torchtitan.config"),
                                     ac=importlib.import_module("torchtitan.distributed.activation_checkpoint"),
                                     dims=importlib.import_module("torchtitan.distributed.parallel_dims"))


def _torchtitan_parse(args: list[str]):
    with warnings.catch_warnings(), mock.patch.dict(os.environ):
        warnings.simplefilter("ignore")
        return _torchtitan().config.ConfigManager().parse_args(args)


@pytest.mark.parametrize("name", TORCHTITAN_PLANS)
def test_torchtitan_runs_as_planned(name, tmp_path):
    tt = _torchtitan()
    plan = llama_layout_plans()[name[6:]] if name.startswith("llama_") else done_when_plans()[name]
    lay, sh = plan.layout, model_shape(plan)
    if sh.mlp == "gelu":
        with pytest.raises(ExportRefused, match="GPT-shaped model .GeLU MLP. has none"):
            export_plan(plan, "torchtitan")
        return
    exp, path = _write(tmp_path, plan, "torchtitan")
    body = " ".join(l.rstrip().rstrip("\\") for l in path.read_text().splitlines() if not l.startswith("#"))
    assert shlex.split(body) == shlex.split(exp.launch)
    run = _check_world(plan, exp.launch)
    assert run.module and run.training_script == "torchtitan.train"
    cfg = _torchtitan_parse(run.training_script_args)
    par, train = cfg.parallelism, cfg.training
    dims = tt.dims.ParallelDims.from_config(par, lay.world_size)    # checks the degrees multiply to the world
    assert dims.dp_replicate * dims.dp_shard == lay.dp and (dims.dp_shard > 1) == _sharded(plan)
    if _sharded(plan):
        assert par.fsdp_reshard_after_forward == ("always" if lay.zero == 3 else "never")
    assert (dims.tp, dims.pp, dims.cp) == (lay.tp, lay.pp, getattr(lay, "cp", 1))
    assert par.enable_sequence_parallel == bool(lay.sp)
    # the model: torchtitan's registry entry has the plan's shape, SwiGLU MLP, untied head
    model = cfg.model_spec.model
    attn, ff = model.layers[0].attention, model.layers[0].feed_forward
    assert (len(model.layers), model.dim, attn.n_heads, attn.n_kv_heads, ff.w1.out_features, model.vocab_size) == \
        (sh.layers, sh.hidden, sh.heads, sh.kv_heads, sh.ffn_hidden, sh.vocab)
    assert ff.w3 is not None and not model.enable_weight_tying
    assert train.seq_len == plan.training.seq_len
    assert train.mixed_precision_param == ("float32" if plan.training.precision == "fp32" else "bfloat16")
    # batch: what torchtitan's trainer and pipeline schedule derive
    assert train.global_batch_size == lay.global_batch
    accumulation = train.global_batch_size // (train.local_batch_size * dims.dp_replicate * dims.dp_shard)
    if lay.pp > 1:
        assert accumulation == 1
        assert train.local_batch_size // par.pipeline_parallel_microbatch_size == lay.num_microbatches
        assert par.pipeline_parallel_microbatch_size == lay.mbs
        assert par.pipeline_parallel_schedule == {"gpipe": "GPipe", "1f1b": "1F1B",
                                                  "interleaved": "Interleaved1F1B"}[lay.schedule]
        parts = par.module_fqns_per_model_part
        assert [sum(m.startswith("layers.") for m in part) for part in parts] == _blocks_per_stage(plan)
        assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "lm_head"]
    else:
        assert train.local_batch_size == lay.mbs and accumulation == lay.num_microbatches
    want_ac = {"none": type(None), "selective": tt.ac.SelectiveAC.Config, "full": tt.ac.FullAC.Config}
    assert type(cfg.activation_checkpoint) is want_ac[lay.recompute]


def test_torchtitan_toml_is_the_older_format(tmp_path):
    plan = done_when_plans()["tp_sp_pp_interleaved"]
    exp, path = _write(tmp_path, plan, "torchtitan-toml")
    sections = tomllib.loads(path.read_text())
    assert sections["parallelism"]["tensor_parallel_degree"] == plan.layout.tp
    assert sections["parallelism"]["module_fqns_per_model_part"][-1][-1] == "output"     # 0.2's name
    assert sections["activation_checkpoint"]["mode"] == plan.layout.recompute
    assert "--job.config_file" in exp.launch


def test_export_warns_when_costed_for_another_framework():
    plan = plan_for("gpt3-350m", "dgx-a100-80gb:1", 64, "dp=8,zero=1")
    plan.training.framework = "megatron"      # what solve --framework megatron records
    assert not _warned(export_plan(plan, "megatron"), "costed for")
    assert _warned(export_plan(plan, "deepspeed"), "costed for --framework megatron", "DeepSpeed")
    # Accelerate without PP runs torch's FSDP2, as autoplan's executor
    assert _warned(export_plan(plan, "accelerate"), "costed for --framework megatron, not autoplan")


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


@lru_cache(maxsize=None)
def _lossy_plan() -> Plan:
    return plan_for("llama3-8b", "dgx-a100-80gb:2", 64, "dp=16,grad_compression=powersgd")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_export_warns_about_lossy_options(framework):
    exp = export_plan(_lossy_plan(), framework)
    assert _warned(exp, "powersgd", "exact gradient averaging")


def test_export_command_writes_file_warns_and_prints_json(tmp_path):
    plan = done_when_plans()["llama3_8b"]
    plan_path = tmp_path / "plan.json"
    plan.save(plan_path)
    out = tmp_path / "ds.json"
    r = run_cli("export", str(plan_path), "--to", "deepspeed", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["gradient_accumulation_steps"] == plan.layout.num_microbatches
    assert "warning:" in r.stderr and "launch: deepspeed" in r.stderr
    r = run_cli("export", str(plan_path), "--to", "megatron", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["framework"] == "megatron" and d["config"]["tensor_model_parallel_size"] == 4
    assert d["text"].count("--") >= 5
    r = run_cli("export", str(plan_path), "--to", "torchtitan-toml")     # no --out: the file's text on stdout
    assert r.returncode == 0 and "[parallelism]" in r.stdout


def test_export_command_refusal_is_one_line_exit_2(tmp_path):
    plan = plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, "dp=4,pp=2,zero=3")
    plan_path = tmp_path / "plan.json"
    plan.save(plan_path)
    out = tmp_path / "ds.json"
    r = run_cli("export", str(plan_path), "--to", "deepspeed", "--out", str(out))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: cannot export to DeepSpeed")
    assert not out.exists()
    r = run_cli("export", str(plan_path), "--to", "nonsense")
    assert r.returncode == 2 and "error:" in r.stderr
