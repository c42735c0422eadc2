"""A Hugging Face Accelerate config file (``accelerate launch --config_file FILE``) for a plan.

Keys are Accelerate's (``accelerate/commands/config/config_args.py`` for the top level; the nested
``fsdp_config`` / ``parallelism_config`` / ``megatron_lm_config`` keys are ``accelerate launch``'s
options, which it turns into the environment its plugins read):

- without pipeline parallel: FSDP2 (``distributed_type: FSDP``, ``fsdp_version: 2``) with a
  ``parallelism_config`` of dp_replicate / dp_shard / tp sizes; ZeRO-3 reshards after forward, the
  other sharded layouts do not (as autoplan's executor); plain DDP (ZeRO-0 without TP) is
  ``MULTI_GPU``; full recomputation is ``fsdp_activation_checkpointing``;
- with pipeline parallel: the Megatron-LM plugin (``distributed_type: MEGATRON_LM``) with tp/pp
  degrees, micro-batch count, sequence parallel, recompute and the distributed optimizer.

Accelerate's file has no batch-size keys for FSDP (the script's DataLoader and
``Accelerator(gradient_accumulation_steps=...)`` set them) and its Megatron-LM plugin takes no
virtual stages or stage placement from the file: those are warned about.
"""

from __future__ import annotations

from autoplan.export.common import (Export, ExportRefused, chain_stages, lossy_warning, sharded_data_parallel,
                                    sharded_zero0_note, uniform_recompute)
from autoplan.plan.plan import Plan

FRAMEWORK = "Accelerate"
MIXED_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}


def _nodes(plan: Plan) -> int:
    """Machines: the cluster's node count when the plan names a catalogue cluster ``NAME:NODES``."""
    spec = plan.training.cluster_spec
    if ":" in spec and spec.rsplit(":", 1)[1].isdigit():
        return int(spec.rsplit(":", 1)[1])
    return 1


def accelerate_config(plan: Plan) -> tuple[dict, list[str]]:
    lay, tr = plan.layout, plan.training
    warnings: list[str] = []
    stages = chain_stages(plan, FRAMEWORK)
    lossy_warning(lay, FRAMEWORK, warnings)
    cfg: dict = {"compute_environment": "LOCAL_MACHINE", "debug": False, "machine_rank": 0,
                 "num_machines": _nodes(plan), "num_processes": lay.world_size,
                 "mixed_precision": MIXED_PRECISION[tr.precision], "use_cpu": False, "rdzv_backend": "static",
                 "same_network": True, "main_training_function": "main"}
    mode = uniform_recompute(lay, stages, FRAMEWORK, warnings)
    if lay.pp > 1:
        cfg["distributed_type"] = "MEGATRON_LM"
        mlm: dict = {"megatron_lm_tp_degree": lay.tp, "megatron_lm_pp_degree": lay.pp,
                     "megatron_lm_num_micro_batches": lay.num_microbatches,
                     "megatron_lm_sequence_parallelism": bool(lay.sp), "megatron_lm_gradient_clipping": 1.0}
        if mode != "none":
            mlm["megatron_lm_recompute_activations"] = True
            mlm["megatron_lm_recompute_granularity"] = mode
            if mode == "full":
                mlm["megatron_lm_recompute_method"] = "uniform"
                mlm["megatron_lm_recompute_num_layers"] = 1
        if lay.dp > 1 and sharded_data_parallel(lay):
            if lay.zero == 3:
                raise ExportRefused(f"cannot export to {FRAMEWORK}: its Megatron-LM plugin (needed for pipeline "
                                    f"parallel) has no ZeRO-3; solve with --layout zero=1 or without PP")
            mlm["megatron_lm_use_distributed_optimizer"] = True
            sharded_zero0_note(lay, FRAMEWORK, "the Megatron-LM plugin's distributed optimizer", warnings)
        counts = [s.num_blocks for s in stages]
        if lay.vp > 1:
            warnings.append(f"{FRAMEWORK}'s Megatron-LM plugin takes no virtual stages from the config file: vp={lay.vp} "
                            f"is dropped (bubble (p-1)/m instead of (p-1)/(v*m)) unless the script sets "
                            f"MegatronLMPlugin(num_layers_per_virtual_pipeline_stage=...)")
            counts = [sum(counts[r::lay.pp]) for r in range(lay.pp)]
        if len(set(counts[:-1])) > 1:
            warnings.append(f"{FRAMEWORK}'s Megatron-LM plugin splits the blocks evenly except for the last stage; "
                            f"the plan's {counts} blocks per rank are approximated")
        elif counts[-1] != counts[0]:
            mlm["megatron_lm_decoder_last_pipeline_num_layers"] = counts[-1]
        cfg["megatron_lm_config"] = mlm
        return cfg, warnings
    sharded = lay.dp > 1 and sharded_data_parallel(lay)
    if lay.dp > 1 and not sharded and lay.tp == 1:
        cfg["distributed_type"] = "MULTI_GPU"
        if mode != "none":
            warnings.append(f"recompute={mode}: plain DDP under {FRAMEWORK} does not recompute by itself; the script "
                            f"enables it (e.g. model.gradient_checkpointing_enable())")
    else:
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = {"fsdp_version": 2, "fsdp_reshard_after_forward": lay.zero == 3,
                              "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                              "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_offload_params": False,
                              "fsdp_cpu_ram_efficient_loading": False,
                              "fsdp_activation_checkpointing": mode != "none"}
        sharded_zero0_note(lay, FRAMEWORK, "FSDP2 without resharding", warnings)
        cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": 1,
                                     "parallelism_config_dp_shard_size": lay.dp,
                                     "parallelism_config_tp_size": lay.tp, "parallelism_config_cp_size": 1}
        if mode == "selective":
            warnings.append(f"{FRAMEWORK}'s FSDP checkpoints whole blocks: the plan's selective recomputation is "
                            f"exported as full recomputation (less memory, the whole forward again in backward)")
        if lay.tp > 1 and lay.sp:
            warnings.append(f"{FRAMEWORK}'s tensor parallel follows the model's own tp_plan; sequence parallel "
                            f"for norms is up to that plan")
    warnings.append(f"{FRAMEWORK}'s config file has no batch sizes: use a per-device batch of {lay.mbs} and "
                    f"Accelerator(gradient_accumulation_steps={lay.num_microbatches}) in the script "
                    f"(global batch {lay.global_batch})")
    return cfg, warnings


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


def export_accelerate(plan: Plan, source: str = "") -> Export:
    cfg, warnings = accelerate_config(plan)
    header = [f"Accelerate config from autoplan plan {source}".rstrip(),
              f"layout {plan.layout.short()}; accelerate launch --config_file THIS_FILE train.py"]
    return Export(framework="accelerate", format="yaml", text=to_yaml(cfg, header), config=cfg, warnings=warnings)
