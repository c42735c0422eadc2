"""A torchtitan TOML job config for a plan.

Keys are torchtitan's ``JobConfig`` fields (``torchtitan/config/job_config.py`` up to 0.2.x, which
loads the file with ``--job.config_file``). torchtitan 0.3 dropped TOML files for Python config
registries; the same ``[parallelism]`` and ``[training]`` keys are its command-line overrides
(``--parallelism.tensor_parallel_degree 8``), printed in the file's header.

==========================  ===================================================================
plan                        config
==========================  ===================================================================
dp, zero                    DDP (ZeRO-0 without TP/PP): ``data_parallel_replicate_degree = dp``;
                            sharded (what autoplan runs otherwise, FSDP2):
                            ``data_parallel_shard_degree = dp`` with ``fsdp_reshard_after_forward``
                            ``"always"`` for ZeRO-3, ``"never"`` for the rest (as autoplan's executor)
tp, sp                      ``tensor_parallel_degree`` (torchtitan's TP always shards the sequence
                            for norms, as sp=1)
pp, vp, schedule, stages    ``pipeline_parallel_degree``, ``pipeline_parallel_schedule`` (GPipe, 1F1B,
                            Interleaved1F1B), ``module_fqns_per_model_part`` (every chunk's modules,
                            torchtitan Llama names: ``tok_embeddings``, ``layers.i``, ``norm``, ``output``)
mbs, m, global batch        with PP: ``local_batch_size = mbs * m``, ``pipeline_parallel_microbatch_size
                            = mbs``; without: ``local_batch_size = mbs`` and ``global_batch_size`` makes
                            torchtitan accumulate m micro-batches
recompute                   ``[activation_checkpoint] mode`` none / selective (op-level) / full
==========================  ===================================================================
"""

from __future__ import annotations

from autoplan.export.common import (Export, StageUnits, chain_stages, lossy_warning, sharded_data_parallel,
                                    sharded_zero0_note, uniform_recompute)
from autoplan.plan.plan import Plan

FRAMEWORK = "torchtitan"
SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}


def module_fqns(stages: list[StageUnits]) -> list[list[str]]:
    """Each chunk's modules by torchtitan's Llama names."""
    return [(["tok_embeddings"] if st.embed else []) + [f"layers.{i}" for i in st.blocks] +
            (["norm", "output"] if st.head else []) for st in stages]


def torchtitan_config(plan: Plan) -> tuple[dict, list[str]]:
    """``{section: {key: value}}`` and the warnings."""
    lay, tr = plan.layout, plan.training
    warnings: list[str] = []
    stages = chain_stages(plan, FRAMEWORK)
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
    if lay.tp > 1 and not lay.sp:
        warnings.append(f"{FRAMEWORK}'s tensor parallel always shards the sequence for norms and dropout (sp=1): "
                        f"less activation memory than the plan counted, and all-gather/reduce-scatter instead of "
                        f"all-reduce")
    par["pipeline_parallel_degree"] = lay.pp
    training: dict = {}
    if lay.pp > 1:
        par["pipeline_parallel_schedule"] = SCHEDULE_NAMES[lay.schedule]
        par["pipeline_parallel_microbatch_size"] = lay.mbs
        par["module_fqns_per_model_part"] = module_fqns(stages)
        training["local_batch_size"] = lay.mbs * lay.num_microbatches
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
    """The same settings as torchtitan command-line overrides (the form torchtitan 0.3 takes)."""
    out = []
    for name in ("parallelism", "training"):
        for k, v in sections[name].items():
            if isinstance(v, list):
                continue    # module lists do not fit one flag; torchtitan 0.3 sets them in the registry
            out.append(f"--{name}.{k} {str(v).lower() if isinstance(v, bool) else v}")
    return out


def export_torchtitan(plan: Plan, source: str = "") -> Export:
    sections, warnings = torchtitan_config(plan)
    lay = plan.layout
    header = [f"torchtitan job config from autoplan plan {source}".rstrip(),
              f"layout {lay.short()} on {lay.world_size} GPUs; set [model] name/flavor for your model",
              "torchtitan <= 0.2: torchrun ... -m torchtitan.train --job.config_file THIS_FILE",
              "torchtitan >= 0.3 reads no TOML; the same settings as overrides:",
              "  " + " ".join(cli_overrides(sections))]
    return Export(framework="torchtitan", format="toml", text=to_toml(sections, header), config=sections,
                  warnings=warnings)
