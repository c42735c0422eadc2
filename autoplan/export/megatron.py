"""The Megatron-LM command (``torchrun ... pretrain_gpt.py`` and its arguments) for a plan.

Argument names are Megatron-LM's (``megatron/training/arguments.py``, not packaged on PyPI); most are
generated from megatron-core's ``TransformerConfig`` / ``DistributedDataParallelConfig`` /
``OptimizerConfig`` fields (``--field-name`` for ``field_name``), which is what the tests load them into:

==========================  ===================================================================
plan                        arguments
==========================  ===================================================================
model shape                 ``--num-layers --hidden-size --ffn-hidden-size --num-attention-heads``,
                            ``--group-query-attention --num-query-groups`` (kv_heads < heads),
                            ``--swiglu`` (SwiGLU MLP; GeLU is Megatron's default), and autoplan's
                            reference model: ``--normalization RMSNorm --norm-epsilon 1e-5
                            --disable-bias-linear --untie-embeddings-and-output-weights``, no dropout,
                            ``--position-embedding-type rope`` (autoplan's model has no position
                            encoding; rope adds no parameters)
vocabulary                  ``--tokenizer-type NullTokenizer --vocab-size V-1`` (it adds one id) and a
                            ``--make-vocab-size-divisible-by`` that leaves V unpadded
tp, sp, cp                  ``--tensor-model-parallel-size``, ``--sequence-parallel``,
                            ``--context-parallel-size``
pp, vp, stages              ``--pipeline-model-parallel-size``; even chunks: nothing, or
                            ``--num-layers-per-virtual-pipeline-stage``; uneven first/last stage
                            only: ``--decoder-first-pipeline-num-layers`` /
                            ``--decoder-last-pipeline-num-layers``; any other placement:
                            ``--pipeline-model-parallel-layout`` (``E`` embedding, ``t`` block,
                            ``L`` loss, ``|`` between chunks)
mbs, global batch           ``--micro-batch-size``, ``--global-batch-size`` (Megatron derives the
                            micro-batch count from the data-parallel size: world / (tp * pp))
recompute                   ``--recompute-granularity selective`` (attention core, as autoplan) or
                            ``full --recompute-method uniform --recompute-num-layers 1``; per-block
                            full recompute with the same count per chunk: ``--recompute-method block``
data parallel sharded       ``--use-distributed-optimizer`` (ZeRO 1/2, and ZeRO-0 with TP/PP, which
                            autoplan runs sharded); ZeRO-3: ``--use-megatron-fsdp
                            --data-parallel-sharding-strategy optim_grads_params
                            --use-distributed-optimizer --no-gradient-accumulation-fusion
                            --ckpt-format fsdp_dtensor``
precision, optimizer        ``--bf16`` / ``--fp16``; ``--optimizer adam`` (AdamW) or ``sgd``,
                            ``--clip-grad 1.0``
launch                      ``torchrun --nnodes N --nproc-per-node G`` with the plan's nodes, after
                            ``CUDA_DEVICE_MAX_CONNECTIONS=1`` where Megatron-LM asks for it (TP or CP)
==========================  ===================================================================
"""

from __future__ import annotations

import math
import shlex

from autoplan.profile.formats import is_fp8
from autoplan.export.common import (NORM_EPS, Export, ExportRefused, StageUnits, chain_stages, framework_warning,
                                    lossy_warning, megatron_launch_env, model_shape, nodes_and_devices, num_blocks,
                                    recompute_counts, sharded_data_parallel, sharded_zero0_note, torchrun_prefix)
from autoplan.plan.plan import Plan

FRAMEWORK = "Megatron-LM"
MEGATRON_CORE_CHECKED = "0.16.1"
"""the megatron-core release whose config classes the tests load this export into"""


def pipeline_layout_string(stages: list[StageUnits]) -> str:
    """Megatron's ``--pipeline-model-parallel-layout``: one ``|``-separated segment per chunk in
    chunk order (chunk j on pipeline rank j mod pp), e.g. ``E,t*12|t*13|...|t*11,L``."""
    segs = []
    for st in stages:
        parts = (["E"] if st.embed else []) + ([f"t*{st.num_blocks}"] if st.num_blocks else []) + \
            (["L"] if st.head else [])
        segs.append(",".join(parts))
    return "|".join(segs)


def pipeline_args(plan: Plan, stages: list[StageUnits], warnings: list[str]) -> dict:
    lay = plan.layout
    counts = [s.num_blocks for s in stages]
    out: dict = {"pipeline_model_parallel_size": lay.pp}
    if lay.pp == 1:
        return out
    if lay.schedule == "gpipe":
        warnings.append("Megatron-LM runs 1F1B, not GPipe: the same step time for these stages and less "
                        "activation memory than the plan counted")
    if not stages[0].embed or not stages[-1].head:
        raise ExportRefused(f"cannot export to {FRAMEWORK}: its GPT model has an embedding on the first stage "
                            f"and the output layer on the last; this plan's model has neither")
    if len(set(counts)) == 1:
        if lay.vp > 1:
            out["num_layers_per_virtual_pipeline_stage"] = counts[0]
        return out
    middle = counts[1:-1]
    if lay.vp == 1 and len(set(middle)) <= 1 and min(counts) > 0:
        out["decoder_first_pipeline_num_layers"] = counts[0]
        out["decoder_last_pipeline_num_layers"] = counts[-1]
        return out
    out["pipeline_model_parallel_layout"] = pipeline_layout_string(stages)
    return out


def recompute_args(plan: Plan, stages: list[StageUnits], warnings: list[str]) -> dict:
    lay = plan.layout
    if not lay.recompute_layers:
        mode = lay.recompute
        if mode == "none":
            return {}
        if mode == "selective":
            return {"recompute_granularity": "selective"}
        return {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
    counts = recompute_counts(lay, stages)
    modes = {m for c in counts for m, k in c.items() if k}
    if modes <= {"none", "full"}:
        full = [c["full"] for c in counts]
        if len(set(full)) == 1:
            return {"recompute_granularity": "full", "recompute_method": "block", "recompute_num_layers": full[0]}
        warnings.append(f"{FRAMEWORK} recomputes the same number of blocks in every pipeline chunk "
                        f"(--recompute-method block); this plan recomputes {full} blocks per chunk: exported as "
                        f"{max(full)} in every chunk, which adds recompute time on the chunks that had fewer")
        return {"recompute_granularity": "full", "recompute_method": "block", "recompute_num_layers": max(full)}
    if modes == {"selective"}:
        return {"recompute_granularity": "selective"}
    mode = "full" if "full" in modes else "selective"
    warnings.append(f"{FRAMEWORK} cannot mix selective and full recomputation; this plan chooses per block "
                    f"({lay.recompute_summary()}): exported as recompute {mode} for every block, which saves at "
                    f"least the planned memory and adds recompute time")
    if mode == "selective":
        return {"recompute_granularity": "selective"}
    return {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}


def vocab_args(vocab: int, tp: int, warnings: list[str], framework: str = FRAMEWORK) -> dict:
    """Megatron-LM's ``NullTokenizer`` with the plan's vocabulary. Megatron pads the tokenizer's size
    (``--vocab-size`` plus one end-of-document id) up to a multiple of ``--make-vocab-size-divisible-by``
    times tp; the divisor chosen here leaves the plan's vocabulary unpadded."""
    out: dict = {"tokenizer_type": "NullTokenizer", "vocab_size": vocab - 1}
    if vocab % tp:
        warnings.append(f"vocabulary {vocab} is not a multiple of tp={tp}: {framework} pads it to "
                        f"{-(-vocab // tp) * tp} rows (a little more embedding and head memory than planned)")
        out["make_vocab_size_divisible_by"] = 1
    else:
        out["make_vocab_size_divisible_by"] = math.gcd(vocab // tp, 128)
    return out


def model_args(plan: Plan, warnings: list[str], framework: str = FRAMEWORK) -> dict:
    """The plan's transformer as Megatron-LM model arguments: autoplan's reference model
    (:mod:`autoplan.models.transformer`) is pre-norm RMSNorm, bias-free linears, untied embedding and
    output weights, no dropout, a GeLU or SwiGLU MLP of ``ffn_hidden`` and grouped-query attention
    when ``kv_heads < heads``. It has no position encoding; rotary embeddings (no parameters) stand in
    for it, which is what a Llama-shaped model uses."""
    sh = model_shape(plan)
    if sh is None:
        warnings.append(f"the plan's model has no transformer shape: add {framework}'s model arguments "
                        f"(--num-layers, --hidden-size, ...) yourself")
        return {}
    tp = plan.layout.tp
    if sh.kv_heads % tp:
        raise ExportRefused(f"cannot export to {framework}: it splits whole key/value head groups over TP ranks "
                            f"(--num-query-groups divisible by tp) and this model has {sh.kv_heads} for tp={tp}")
    args: dict = {"num_layers": sh.layers, "hidden_size": sh.hidden, "ffn_hidden_size": sh.ffn_hidden,
                  "num_attention_heads": sh.heads}
    if sh.kv_heads != sh.heads:
        args.update(group_query_attention=True, num_query_groups=sh.kv_heads)
    if sh.mlp == "swiglu":
        args["swiglu"] = True
    args.update(normalization="RMSNorm", norm_epsilon=NORM_EPS, disable_bias_linear=True,
                position_embedding_type="rope", untie_embeddings_and_output_weights=True,
                attention_dropout=0.0, hidden_dropout=0.0,
                seq_length=plan.training.seq_len, max_position_embeddings=plan.training.seq_len)
    args.update(vocab_args(sh.vocab, tp, warnings, framework))
    return args


def megatron_args(plan: Plan) -> tuple[dict, list[str]]:
    """Megatron-LM arguments as ``{dest: value}`` (dest = flag without ``--``, ``-`` as ``_``;
    ``True`` for a switch), and the warnings."""
    lay, tr = plan.layout, plan.training
    warnings: list[str] = []
    stages = chain_stages(plan, FRAMEWORK)
    framework_warning(plan, "megatron", FRAMEWORK, warnings)
    lossy_warning(lay, FRAMEWORK, warnings)
    sh = model_shape(plan)
    if sh is not None and num_blocks(stages) != sh.layers:
        raise ExportRefused(f"cannot export to {FRAMEWORK}: the plan's stages hold {num_blocks(stages)} blocks "
                            f"but the shape says {sh.layers} layers")
    args = model_args(plan, warnings)
    args["tensor_model_parallel_size"] = lay.tp
    if lay.sp:
        args["sequence_parallel"] = True
    cp = getattr(lay, "cp", 1)
    if cp > 1:
        args["context_parallel_size"] = cp
    args.update(pipeline_args(plan, stages, warnings))
    args["micro_batch_size"] = lay.mbs
    args["global_batch_size"] = lay.global_batch
    args.update(recompute_args(plan, stages, warnings))
    if lay.dp > 1 and sharded_data_parallel(lay):
        if lay.zero == 3:
            # as Megatron-LM's own Megatron-FSDP examples: it shards through the distributed optimizer,
            # saves only fsdp_dtensor checkpoints (validate_args), and fuses no gradient accumulation
            args.update(use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads_params",
                        use_distributed_optimizer=True, no_gradient_accumulation_fusion=True,
                        ckpt_format="fsdp_dtensor")
        else:
            args["use_distributed_optimizer"] = True
            sharded_zero0_note(lay, FRAMEWORK, "--use-distributed-optimizer (optimizer state sharded)", warnings)
            if lay.zero == 2 and lay.num_microbatches == 1:
                warnings.append(f"ZeRO-2: {FRAMEWORK}'s distributed optimizer shards optimizer state but keeps the "
                                f"whole gradient buffer on every device, where the plan counted sharded gradients "
                                f"(more memory per device than predicted)")
    if tr.precision == "bf16" or is_fp8(tr.precision):
        args["bf16"] = True
    elif tr.precision == "fp16":
        args["fp16"] = True
    # Megatron-LM's "adam" is AdamW (decoupled weight decay); clip the global gradient norm at 1.0
    args["optimizer"] = "sgd" if tr.optimizer == "sgd" else "adam"
    args["clip_grad"] = 1.0
    return args, warnings


SCRIPT = "pretrain_gpt.py"
NEGATED_FLAGS = {"disable_bias_linear": "add_bias_linear",
                 "no_gradient_accumulation_fusion": "gradient_accumulation_fusion"}
"""Megatron-LM switches whose argparse destination is another name, set to False"""


def as_destinations(args: dict) -> dict:
    """``args`` (flag names, ``-`` as ``_``) as the attributes Megatron-LM's parser sets: what code that
    sets Megatron's arguments directly (Accelerate's Megatron-LM plugin) must use."""
    return {NEGATED_FLAGS.get(k, k): (False if k in NEGATED_FLAGS else v) for k, v in args.items()}


def args_to_text(args: dict, header: list[str], launch: str) -> str:
    """A shell command: ``launch`` then one argument per line, ``\\``-continued."""
    lines = [f"# {h}" for h in header]
    items = [launch]
    for dest, val in args.items():
        flag = "--" + dest.replace("_", "-")
        if val is True:
            items.append(f"  {flag}")
        else:
            items.append(f"  {flag} {shlex.quote(str(val))}")
    lines += [it + (" \\" if i < len(items) - 1 else "") for i, it in enumerate(items)]
    return "\n".join(lines) + "\n"


def export_megatron(plan: Plan, source: str = "") -> Export:
    args, warnings = megatron_args(plan)
    lay = plan.layout
    nodes, per_node = nodes_and_devices(plan)
    launch = f"{megatron_launch_env(lay, bool(args.get('use_megatron_fsdp')))}{torchrun_prefix(plan)} {SCRIPT}"
    header = [f"Megatron-LM (checked against megatron-core {MEGATRON_CORE_CHECKED}) from autoplan plan "
              f"{source}".rstrip(),
              f"layout {lay.short()}; {nodes} node(s) x {per_node} GPUs = {lay.world_formula(values=True)} "
              f"(Megatron derives dp = world size / (tp * pp * cp))",
              "run from a Megatron-LM checkout on every node (NODE_RANK, MASTER_ADDR set); add the data "
              f"(--data-path or --mock-data), --lr and --train-iters"]
    return Export(framework="megatron", format="sh", text=args_to_text(args, header, launch), config=args,
                  warnings=warnings, launch=launch)
