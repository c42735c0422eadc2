"""torchtitan: a ``torchrun -m torchtitan.train`` command line for a plan (torchtitan 0.3), or, with
``--to torchtitan-toml``, the TOML job file of torchtitan <= 0.2.

torchtitan 0.3 reads no job file: ``--module M --config C`` picks a Python config function of its
model registry (the model itself comes only from there) and ``--section.key value`` overrides the
rest (``torchtitan/config/manager.py``). So a plan exports only where its transformer is one of the
registered Llama 3 models (:data:`REGISTERED_MODELS`); a GPT-shaped plan (GeLU MLP) or any other
shape has no torchtitan model and is refused.

==========================  ===================================================================
plan                        override
==========================  ===================================================================
dp, zero                    DDP (ZeRO-0 without TP/PP): ``data_parallel_replicate_degree = dp``;
                            sharded (what autoplan runs otherwise, FSDP2):
                            ``data_parallel_shard_degree = dp`` with ``fsdp_reshard_after_forward``
                            ``always`` for ZeRO-3, ``never`` for the rest (as autoplan's executor)
tp, sp, cp                  ``tensor_parallel_degree``, ``enable_sequence_parallel``,
                            ``context_parallel_degree``
pp, vp, schedule, stages    ``pipeline_parallel_degree``, ``pipeline_parallel_schedule`` (GPipe, 1F1B,
                            Interleaved1F1B), ``module_fqns_per_model_part`` (every chunk's modules:
                            ``tok_embeddings``, ``layers.i``, ``norm``, ``lm_head``; 0.2: ``output``);
                            CUDA graphs off (torchtitan 0.3 refuses them with PP)
mbs, m, global batch        with PP: ``local_batch_size = mbs * m``, ``pipeline_parallel_microbatch_size
                            = mbs``; without: ``local_batch_size = mbs`` and ``global_batch_size`` makes
                            torchtitan accumulate m micro-batches
recompute                   ``activation_checkpoint:none|selective|full`` (0.2: ``[activation_checkpoint]
                            mode``); torchtitan's selective is op-level (warned)
precision                   ``mixed_precision_param`` bfloat16 / float32 (fp16 exported as bfloat16)
==========================  ===================================================================
"""

from __future__ import annotations

import shlex

from autoplan.profile.formats import is_fp8
from autoplan.export.common import (Export, ExportRefused, StageUnits, chain_stages, framework_warning,
                                    lossy_warning, model_shape, sharded_data_parallel, sharded_zero0_note,
                                    torchrun_prefix, uniform_recompute)
from autoplan.plan.plan import Plan

FRAMEWORK = "torchtitan"
TORCHTITAN_CHECKED = "0.3.0"
"""the torchtitan release whose config manager the tests run on this export"""
SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
REGISTERED_MODELS = {
    # (layers, hidden, heads, kv_heads, ffn_hidden, vocab, mlp) -> (--module, --config): torchtitan 0.3.0's
    # models/llama3 flavors 8B, 70B, 405B (config_registry.llama3_8b / _70b / _405b); the tests read
    # these shapes back from the installed torchtitan
    (32, 4096, 32, 8, 14336, 128256, "swiglu"): ("llama3", "llama3_8b"),
    (80, 8192, 64, 8, 28672, 128256, "swiglu"): ("llama3", "llama3_70b"),
    (126, 16384, 128, 8, 53248, 128256, "swiglu"): ("llama3", "llama3_405b"),
}


def registered_model(plan: Plan) -> tuple[str, str]:
    """torchtitan's ``(--module, --config)`` for the plan's transformer, or a refusal."""
    sh = model_shape(plan)
    if sh is None:
        raise ExportRefused(f"cannot export to {FRAMEWORK}: it builds only the models of its registry, and this "
                            f"plan's model has no transformer shape to match one")
    key = (sh.layers, sh.hidden, sh.heads, sh.kv_heads, sh.ffn_hidden, sh.vocab, sh.mlp)
    if key not in REGISTERED_MODELS:
        what = "a GPT-shaped model (GeLU MLP) has none" if sh.mlp == "gelu" else "none has this shape"
        raise ExportRefused(f"cannot export to {FRAMEWORK}: it builds only the models of its registry (Llama 3 "
                            f"8B/70B/405B here) and {what} ({sh.name}: {sh.layers} layers, hidden {sh.hidden}, "
                            f"{sh.heads}/{sh.kv_heads} heads, ffn {sh.ffn_hidden}, vocab {sh.vocab})")
    return REGISTERED_MODELS[key]


def module_fqns(stages: list[StageUnits], output: str = "lm_head") -> list[list[str]]:
    """Each chunk's modules by torchtitan's Llama names (the output layer is ``output`` up to 0.2)."""
    return [(["tok_embeddings"] if st.embed else []) + [f"layers.{i}" for i in st.blocks] +
            (["norm", output] if st.head else []) for st in stages]


def torchtitan_config(plan: Plan, legacy: bool = False) -> tuple[dict, list[str]]:
    """``{section: {key: value}}`` and the warnings; ``legacy``: torchtitan <= 0.2's TOML names."""
    lay, tr = plan.layout, plan.training
    warnings: list[str] = []
    stages = chain_stages(plan, FRAMEWORK)
    framework_warning(plan, "torchtitan", FRAMEWORK, warnings)
    lossy_warning(lay, FRAMEWORK, warnings)
    sharded = lay.dp > 1 and sharded_data_parallel(lay)
    par: dict = {
        "data_parallel_replicate_degree": lay.dp if not sharded else 1,
        "data_parallel_shard_degree": lay.dp if sharded else 1,
    }
    if sharded:
        par["fsdp_reshard_after_forward"] = "always" if lay.zero == 3 else "never"
        sharded_zero0_note(lay, FRAMEWORK, "data_parallel_shard_degree with fsdp_reshard_after_forward = never",
                           warnings)
    par["tensor_parallel_degree"] = lay.tp
    if legacy:
        if lay.tp > 1 and not lay.sp:
            warnings.append(f"{FRAMEWORK} <= 0.2's tensor parallel always shards the sequence for norms (sp=1): "
                            f"less activation memory than the plan counted, and all-gather/reduce-scatter instead "
                            f"of all-reduce")
    else:
        par["enable_sequence_parallel"] = bool(lay.sp)
        par["context_parallel_degree"] = getattr(lay, "cp", 1)
    par["pipeline_parallel_degree"] = lay.pp
    training: dict = {}
    if lay.pp > 1:
        par["pipeline_parallel_schedule"] = SCHEDULE_NAMES[lay.schedule]
        par["pipeline_parallel_microbatch_size"] = lay.mbs
        par["module_fqns_per_model_part"] = module_fqns(stages, "output" if legacy else "lm_head")
        training["local_batch_size"] = lay.mbs * lay.num_microbatches
        if not legacy:
            training["disable_cuda_graphs"] = True
    else:
        training["local_batch_size"] = lay.mbs
    training["global_batch_size"] = lay.global_batch
    training["seq_len"] = tr.seq_len
    if tr.precision == "fp16":
        warnings.append(f"{FRAMEWORK} trains in bfloat16 or float32 mixed precision, not fp16: exported as bfloat16")
    training["mixed_precision_param"] = "float32" if tr.precision == "fp32" else "bfloat16"
    mode = uniform_recompute(lay, stages, FRAMEWORK, warnings)
    ac: dict = {"mode": mode}
    if mode == "selective":
        ac["selective_ac_option"] = "op"
        warnings.append(f"{FRAMEWORK}'s selective recomputation is op-level (it keeps matmul outputs, recomputes "
                        f"the rest), close to but not the plan's attention-only recomputation: memory and "
                        f"recompute time differ somewhat from the prediction")
    job = {"description": f"autoplan {lay.short()}"}
    return {"job": job, "training": training, "parallelism": par, "activation_checkpoint": ac}, warnings


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML for {type(v).__name__}")


def to_toml(sections: dict, header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    for name, body in sections.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def cli_overrides(sections: dict) -> list[str]:
    """The sections as torchtitan 0.3 command-line arguments: ``--section.key value`` (a list of module
    lists as one comma-joined argument per chunk), recompute as the ``activation_checkpoint:MODE``
    subcommand."""
    out = []
    for name in ("parallelism", "training"):
        for k, v in sections[name].items():
            flag = f"--{name}.{k}"
            if isinstance(v, bool):
                out.append(flag if v else f"--{name}.no_{k}")     # tyro's switches: --x / --no_x
            elif isinstance(v, list):
                out.append(" ".join([flag] + [shlex.quote(",".join(part)) for part in v]))
            else:
                out.append(f"{flag} {v}")
    out.append(f"activation-checkpoint:{sections['activation_checkpoint']['mode']}")
    return out


def launch_parts(plan: Plan, sections: dict) -> list[str]:
    """The command in pieces: torchrun, the registry's module and config, then the overrides."""
    module, config = registered_model(plan)
    return [f"{torchrun_prefix(plan)} -m torchtitan.train", f"--module {module} --config {config}"] + \
        cli_overrides(sections)


def export_torchtitan(plan: Plan, source: str = "") -> Export:
    """torchtitan 0.3: the command line (a shell script)."""
    sections, warnings = torchtitan_config(plan)
    module, config = registered_model(plan)
    lay = plan.layout
    if config == "llama3_405b" and not is_fp8(plan.training.precision):
        warnings.append(f"{FRAMEWORK}'s llama3_405b config trains the linear layers in float8 (and compiles), where "
                        f"the plan was costed in {plan.training.precision}: faster and less memory than predicted")
    parts = launch_parts(plan, sections)
    launch = " ".join(parts)
    header = [f"torchtitan (checked against {TORCHTITAN_CHECKED}) command from autoplan plan {source}".rstrip(),
              f"layout {lay.short()} on {lay.world_size} GPUs; run on every node (MASTER_ADDR set)"]
    text = "".join(f"# {h}\n" for h in header) + " \\\n  ".join(parts) + "\n"
    return Export(framework="torchtitan", format="sh", text=text, config=sections, warnings=warnings, launch=launch)


def export_torchtitan_toml(plan: Plan, source: str = "") -> Export:
    """torchtitan <= 0.2: the TOML job file (``--job.config_file``)."""
    sections, warnings = torchtitan_config(plan, legacy=True)
    lay = plan.layout
    launch = f"{torchrun_prefix(plan)} -m torchtitan.train --job.config_file THIS_FILE"
    header = [f"torchtitan <= 0.2 job config from autoplan plan {source}".rstrip(),
              f"layout {lay.short()} on {lay.world_size} GPUs; set [model] name/flavor for your model",
              launch]
    return Export(framework="torchtitan-toml", format="toml", text=to_toml(sections, header), config=sections,
                  warnings=warnings, launch=launch)
