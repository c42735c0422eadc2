"""A Hugging Face Accelerate config file (``accelerate launch --config_file FILE``) for a plan.

Keys are Accelerate's (``accelerate/commands/config/config_args.py`` for the top level; the nested
``fsdp_config`` / ``parallelism_config`` / ``megatron_lm_config`` keys are ``accelerate launch``'s
options, which it turns into the environment its plugins read):

- without pipeline parallel: FSDP2 (``distributed_type: FSDP``, ``fsdp_version: 2``) with a
  ``parallelism_config`` of dp_replicate / dp_shard / tp / cp sizes; ZeRO-3 reshards after forward,
  the other sharded layouts do not (as autoplan's executor); one FSDP unit per transformer block
  (``fsdp_transformer_layer_cls_to_wrap``); plain DDP (ZeRO-0 without TP) is ``MULTI_GPU``; full
  recomputation is ``fsdp_activation_checkpointing``;
- with pipeline parallel: the Megatron-LM plugin (``distributed_type: MEGATRON_LM``) with tp/pp/cp
  degrees (cp spelled out: the plugin's default is 2), micro-batch count, sequence parallel, full
  recompute and the distributed optimizer. What the file cannot carry -- recompute none or selective
  (the plugin always passes granularity, method and layer count), the model beyond its size (MLP kind
  and width, GQA, RMSNorm, no biases, untied head) and virtual or uneven stages -- is the
  ``other_megatron_args`` dict in the file's header, for ``MegatronLMPlugin(other_megatron_args=...)``.

Accelerate's file has no batch sizes (the script's DataLoader and, for FSDP,
``Accelerator(gradient_accumulation_steps=...)`` set them): warned about with the values to use.
"""

from __future__ import annotations

from autoplan.export.common import (Export, ExportRefused, chain_stages, framework_warning, lossy_warning,
                                    megatron_launch_env, model_shape, nodes_and_devices, sharded_data_parallel,
                                    sharded_zero0_note, uniform_recompute)
from autoplan.export.megatron import as_destinations, model_args, pipeline_args, recompute_args
from autoplan.plan.plan import Plan

FRAMEWORK = "Accelerate"
ACCELERATE_CHECKED = "1.15.0"
"""the Accelerate release whose launch parser and plugins the tests run on this export"""
MIXED_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}
# the Megatron-LM arguments Accelerate's Megatron-LM plugin sets itself from the script's Hugging Face
# model (MegatronLMPlugin.set_network_size_args): not repeated in other_megatron_args
SET_FROM_HF_MODEL = {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "max_position_embeddings",
                     "tokenizer_type", "vocab_size", "make_vocab_size_divisible_by"}
RECOMPUTE_KEYS = ("recompute_granularity", "recompute_method", "recompute_num_layers")


def block_class(plan: Plan) -> str:
    """The transformer block class FSDP2 wraps one unit per instance: the Hugging Face decoder layer for
    ``hf:gpt2*`` / ``hf:llama*`` models, else autoplan's reference ``Block``
    (:func:`autoplan.models.transformer.build_model`)."""
    spec = plan.training.model_spec
    if spec.startswith("hf:gpt2"):
        return "GPT2Block"
    if spec.startswith("hf:llama"):
        return "LlamaDecoderLayer"
    return "Block"


def other_megatron_args(plan: Plan, stages, warnings: list[str]) -> dict:
    """What the training script passes as ``MegatronLMPlugin(other_megatron_args=...)``: the settings
    the config file cannot carry. The plugin always passes recompute granularity, method and layer count
    (default full / uniform / 1), so the plan's recompute is spelled out here, ``None`` where Megatron
    takes none; and the model beyond the size the plugin reads from the Hugging Face config (MLP kind
    and width, grouped-query attention, RMSNorm, bias-free linears, untied head); and virtual stages or
    an uneven placement."""
    model = as_destinations(model_args(plan, warnings, FRAMEWORK))    # the plugin sets attributes, not flags
    extra = {k: v for k, v in model.items() if k not in SET_FROM_HF_MODEL}
    rec = recompute_args(plan, stages, warnings)
    extra.update({k: rec.get(k) for k in RECOMPUTE_KEYS})
    pipe = pipeline_args(plan, stages, warnings)
    extra.update({k: v for k, v in pipe.items() if k != "pipeline_model_parallel_size"})
    return extra


def accelerate_config(plan: Plan) -> tuple[dict, dict | None, list[str]]:
    """The config file's keys, the ``other_megatron_args`` the script passes (None without the
    Megatron-LM plugin), and the warnings."""
    lay, tr = plan.layout, plan.training
    warnings: list[str] = []
    stages = chain_stages(plan, FRAMEWORK)
    # with PP it runs Megatron-LM; without, torch's FSDP2 / DDP as autoplan's own executor does
    framework_warning(plan, "megatron" if lay.pp > 1 else "autoplan", FRAMEWORK, warnings)
    lossy_warning(lay, FRAMEWORK, warnings)
    nodes, _ = nodes_and_devices(plan)
    cp = getattr(lay, "cp", 1)
    cfg: dict = {"compute_environment": "LOCAL_MACHINE", "debug": False, "machine_rank": 0,
                 "num_machines": nodes, "num_processes": lay.world_size,
                 "mixed_precision": MIXED_PRECISION[tr.precision], "use_cpu": False, "rdzv_backend": "static",
                 "same_network": True, "main_training_function": "main"}
    if lay.pp > 1:
        if cp > 1:
            raise ExportRefused(f"cannot export to {FRAMEWORK}: its Megatron-LM plugin computes the data-parallel "
                                f"size as world / (tp * pp) and would not match cp={cp}'s; solve with --layout cp=1 "
                                f"or export --to megatron")
        cfg["distributed_type"] = "MEGATRON_LM"
        mlm: dict = {"megatron_lm_tp_degree": lay.tp, "megatron_lm_pp_degree": lay.pp,
                     "megatron_lm_context_parallel_size": cp,     # the plugin's default is 2
                     "megatron_lm_num_micro_batches": lay.num_microbatches,
                     "megatron_lm_sequence_parallelism": bool(lay.sp), "megatron_lm_gradient_clipping": 1.0}
        if lay.dp > 1 and sharded_data_parallel(lay):
            if lay.zero == 3:
                raise ExportRefused(f"cannot export to {FRAMEWORK}: its Megatron-LM plugin (needed for pipeline "
                                    f"parallel) has no ZeRO-3; solve with --layout zero=1 or without PP")
            mlm["megatron_lm_use_distributed_optimizer"] = True
            sharded_zero0_note(lay, FRAMEWORK, "the Megatron-LM plugin's distributed optimizer", warnings)
        extra = other_megatron_args(plan, stages, warnings)
        rec = {k: extra[k] for k in RECOMPUTE_KEYS if extra[k] is not None}
        mlm.update({f"megatron_lm_{k}": v for k, v in rec.items()})
        cfg["megatron_lm_config"] = mlm
        warnings.append(f"{FRAMEWORK}'s Megatron-LM plugin takes the micro-batch size from the script's DataLoader: "
                        f"use batch_size={lay.mbs} (global batch {lay.global_batch} = dp {lay.dp} x {lay.mbs} x "
                        f"{lay.num_microbatches} micro-batches); pass other_megatron_args as the file's header says")
        return cfg, extra, warnings
    mode = uniform_recompute(lay, stages, FRAMEWORK, warnings)
    sharded = lay.dp > 1 and sharded_data_parallel(lay)
    if lay.dp > 1 and not sharded and lay.tp == 1 and cp == 1:
        cfg["distributed_type"] = "MULTI_GPU"
        if mode != "none":
            warnings.append(f"recompute={mode}: plain DDP under {FRAMEWORK} does not recompute by itself; the script "
                            f"enables it (e.g. model.gradient_checkpointing_enable())")
    else:
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = {"fsdp_version": 2, "fsdp_reshard_after_forward": lay.zero == 3,
                              "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                              "fsdp_transformer_layer_cls_to_wrap": block_class(plan),
                              "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_offload_params": False,
                              "fsdp_cpu_ram_efficient_loading": False,
                              "fsdp_activation_checkpointing": mode != "none"}
        sharded_zero0_note(lay, FRAMEWORK, "FSDP2 without resharding", warnings)
        cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": 1,
                                     "parallelism_config_dp_shard_size": lay.dp,
                                     "parallelism_config_tp_size": lay.tp, "parallelism_config_cp_size": cp}
        if mode == "selective":
            warnings.append(f"{FRAMEWORK}'s FSDP checkpoints whole blocks: the plan's selective recomputation is "
                            f"exported as full recomputation (less memory, the whole forward again in backward)")
        if lay.tp > 1 and lay.sp:
            warnings.append(f"{FRAMEWORK}'s tensor parallel follows the model's own tp_plan; sequence parallel "
                            f"for norms is up to that plan")
    sh = model_shape(plan)
    if sh is not None and block_class(plan) == "Block":
        warnings.append(f"{FRAMEWORK} trains the script's model: build autoplan's reference transformer "
                        f"(autoplan.models.transformer.build_model) for the plan's {sh.name}, or set "
                        f"fsdp_transformer_layer_cls_to_wrap to your model's block class")
    warnings.append(f"{FRAMEWORK}'s config file has no batch sizes: use a per-device batch of {lay.mbs} and "
                    f"Accelerator(gradient_accumulation_steps={lay.num_microbatches}) in the script "
                    f"(global batch {lay.global_batch})")
    return cfg, None, warnings


def _yaml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return str(v)


def to_yaml(cfg: dict, header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines.append(f"{k}:")
            lines += [f"  {kk}: {_yaml_value(vv)}" for kk, vv in v.items()]
        else:
            lines.append(f"{k}: {_yaml_value(v)}")
    return "\n".join(lines) + "\n"


def launch_line(plan: Plan) -> str:
    """``accelerate launch`` on every node with the plan's machines and processes (and, for the
    Megatron-LM plugin, the environment Megatron-LM's start-up check asks for)."""
    nodes, _ = nodes_and_devices(plan)
    multi = " --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR --main_process_port 29500" if nodes > 1 else ""
    env = megatron_launch_env(plan.layout) if plan.layout.pp > 1 else ""
    return (f"{env}accelerate launch --config_file THIS_FILE --num_machines {nodes} "
            f"--num_processes {plan.layout.world_size}{multi} train.py")


OTHER_ARGS_PREFIX = "train.py: MegatronLMPlugin(other_megatron_args="


def export_accelerate(plan: Plan, source: str = "") -> Export:
    cfg, extra, warnings = accelerate_config(plan)
    launch = launch_line(plan)
    header = [f"Accelerate config (checked against accelerate {ACCELERATE_CHECKED}) from autoplan plan "
              f"{source}".rstrip(), f"layout {plan.layout.short()}; {launch}"]
    config = dict(cfg)
    if extra is not None:
        header.append(f"{OTHER_ARGS_PREFIX}{extra!r})")
        config["other_megatron_args"] = extra
    return Export(framework="accelerate", format="yaml", text=to_yaml(cfg, header), config=config,
                  warnings=warnings, launch=launch)
