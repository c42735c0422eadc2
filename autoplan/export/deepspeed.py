"""A DeepSpeed JSON config (``deepspeed.initialize(config=...)``) for a plan.

Keys are DeepSpeed's (``deepspeed/runtime/config.py`` and its sub-configs):

==========================  ===================================================================
plan                        config
==========================  ===================================================================
global batch, mbs, m        ``train_batch_size``, ``train_micro_batch_size_per_gpu``,
                            ``gradient_accumulation_steps`` (DeepSpeed checks
                            batch = micro * accumulation * data-parallel size)
zero                        ``zero_optimization.stage``; ZeRO-0 with TP or PP, which autoplan runs
                            sharded, is stage 1 (what the plan's memory counted is closer to it)
tp                          ``tensor_parallel.autotp_size`` (AutoTP training)
pp                          nothing in the file: the stage count and the split are
                            ``PipelineModule(num_stages=pp, partition_method=...)`` in the training
                            script (DeepSpeed never reads ``pipeline.stages`` / ``pipeline.partition``)
recompute full              ``pipeline.activation_checkpoint_interval: 1`` with PP (read by
                            ``PipelineEngine``); without PP the script calls
                            ``deepspeed.checkpointing.checkpoint`` per block
precision                   ``bf16.enabled`` / ``fp16.enabled``
optimizer                   ``optimizer.type`` AdamW or SGD (learning rate: the script's), and
                            ``gradient_clipping: 1.0``
fp16 gradient compression   ``communication_data_type: "fp16"``
==========================  ===================================================================

DeepSpeed's pipeline engine runs ZeRO stage 1 at most (``PipelineEngine`` asserts it), one chunk per
rank (no interleaving), and partitions layers itself; AutoTP builds a (world / tp, tp) device mesh
with no pipeline axis, so TP together with PP is refused; AutoTP has no sequence parallel, DeepSpeed
no selective recomputation. Those are refused or approximated with a warning. The launch line is
``deepspeed`` with the plan's nodes and GPUs per node (``Export.launch``; JSON has no comments).
"""

from __future__ import annotations

import json

from autoplan.profile.formats import is_fp8
from autoplan.export.common import (Export, ExportRefused, chain_stages, framework_warning, lossy_warning,
                                    nodes_and_devices, sharded_data_parallel, sharded_zero0_note, uniform_recompute)
from autoplan.plan.plan import Plan

FRAMEWORK = "DeepSpeed"
DEEPSPEED_CHECKED = "0.19.8"
"""the DeepSpeed release whose config classes the tests load this export into"""
OPTIMIZER_TYPES = {"adamw": "AdamW", "adamw-bf16": "AdamW", "sgd": "SGD"}


def zero_stage(plan: Plan) -> int:
    """DeepSpeed's ZeRO stage for the plan (see the module docstring)."""
    lay = plan.layout
    if lay.dp > 1 and lay.zero == 0 and sharded_data_parallel(lay):
        return 1
    return lay.zero


def deepspeed_config(plan: Plan) -> tuple[dict, list[str]]:
    lay, tr = plan.layout, plan.training
    warnings: list[str] = []
    stages = chain_stages(plan, FRAMEWORK) if lay.pp > 1 else None
    framework_warning(plan, "deepspeed", FRAMEWORK, warnings)
    lossy_warning(lay, FRAMEWORK, warnings, fp16_allowed=True)
    stage = zero_stage(plan)
    if lay.pp > 1 and lay.tp > 1:
        raise ExportRefused(f"cannot export to {FRAMEWORK}: its AutoTP builds a (world/tp, tp) device mesh with no "
                            f"pipeline axis, so tp={lay.tp} with pp={lay.pp} is not a layout it runs (solve with "
                            f"--layout tp=1 or pp=1 for {FRAMEWORK})")
    if getattr(lay, "cp", 1) > 1:
        raise ExportRefused(f"cannot export to {FRAMEWORK}: it has no ring context parallel (its Ulysses sequence "
                            f"parallel splits heads, not the sequence of attention); solve with --layout cp=1")
    if lay.pp > 1 and stage > 1:
        raise ExportRefused(f"cannot export to {FRAMEWORK}: its pipeline engine runs ZeRO stage 1 at most, and this "
                            f"plan shards with ZeRO-{lay.zero} over pp={lay.pp} stages (solve with --layout zero=1 "
                            f"or without pipeline parallel for {FRAMEWORK})")
    sharded_zero0_note(lay, FRAMEWORK, "ZeRO stage 1 (optimizer state sharded" +
                       ("; the whole gradients are kept, more than the plan counted without gradient accumulation)"
                        if lay.num_microbatches == 1 else ")"), warnings)
    cfg: dict = {
        "train_batch_size": lay.global_batch,
        "train_micro_batch_size_per_gpu": lay.mbs,
        "gradient_accumulation_steps": lay.num_microbatches,
        "zero_optimization": {"stage": stage},
        "optimizer": {"type": OPTIMIZER_TYPES[tr.optimizer]},
        "gradient_clipping": 1.0,
    }
    if tr.precision == "bf16" or is_fp8(tr.precision):
        cfg["bf16"] = {"enabled": True}
    elif tr.precision == "fp16":
        cfg["fp16"] = {"enabled": True}
    if lay.grad_compression == "fp16":
        cfg["communication_data_type"] = "fp16"
    if lay.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": lay.tp}
        if lay.sp:
            warnings.append(f"{FRAMEWORK} AutoTP has no sequence parallel: layer norms and dropout keep whole "
                            f"activations on every TP rank (more activation memory than the plan counted)")
    mode = uniform_recompute(lay, stages or [], FRAMEWORK, warnings) if lay.recompute_layers else lay.recompute
    if mode == "selective":
        warnings.append(f"{FRAMEWORK} has no selective (attention-only) recomputation: exported as full "
                        f"recomputation of every block, which saves more memory and adds the whole forward "
                        f"again in backward")
        mode = "full"
    if lay.pp > 1:
        counts = [s.num_blocks for s in stages]
        even = len(set(counts)) == 1
        cfg["pipeline"] = {"activation_checkpoint_interval": 1 if mode == "full" else 0}
        if lay.vp > 1:
            warnings.append(f"{FRAMEWORK}'s pipeline runs one chunk per rank (no interleaved schedule): vp={lay.vp} "
                            f"is dropped, so the bubble grows from (p-1)/(v*m) to (p-1)/m of the step and each rank "
                            f"holds its layers as one chunk")
        if lay.schedule == "gpipe":
            warnings.append(f"{FRAMEWORK}'s pipeline runs its own 1F1B-style schedule, not GPipe: the same step "
                            f"time for these stages and less activation memory")
        if not even:
            warnings.append(f"{FRAMEWORK} partitions the layers itself (PipelineModule partition_method); the plan's "
                            f"uneven stages ({counts} blocks per stage) are approximated by 'parameters', which "
                            f"balances parameter counts instead of the plan's measured times")
        warnings.append(f"give the training script PipelineModule(num_stages={lay.pp}, partition_method="
                        f"'{'uniform' if even else 'parameters'}'); {FRAMEWORK} takes the stage count and the split "
                        f"from the module, not from this file")
    elif mode == "full":
        cfg["activation_checkpointing"] = {"partition_activations": False}
        warnings.append(f"full recomputation: the training script wraps each block in "
                        f"deepspeed.checkpointing.checkpoint ({FRAMEWORK} configures it but does not apply it)")
    return cfg, warnings


def launch_line(plan: Plan) -> str:
    """The ``deepspeed`` launcher with the plan's nodes and GPUs per node (a hostfile lists the nodes)."""
    nodes, per_node = nodes_and_devices(plan)
    hosts = " --hostfile hostfile" if nodes > 1 else ""
    return f"deepspeed{hosts} --num_nodes {nodes} --num_gpus {per_node} train.py --deepspeed_config THIS_FILE"


def export_deepspeed(plan: Plan, source: str = "") -> Export:
    cfg, warnings = deepspeed_config(plan)
    return Export(framework="deepspeed", format="json", text=json.dumps(cfg, indent=2) + "\n", config=cfg,
                  warnings=warnings, launch=launch_line(plan))
