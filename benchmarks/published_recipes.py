"""Published training recipes of 2024-2025 on H100/H200 that train in fp8 and/or with context parallel (cp).

Plain data, no autoplan import: each :class:`Recipe` is one published run of a dense decoder (GPT/Llama
style; MoE rows of the same tables are left out), with its model shape, GPU, GPU count, layout as
published (tp, pp, cp, vp, dp, micro-batch, global batch, recomputation, sequence parallel, ZeRO/FSDP,
fp8 and its scaling recipe), the software that ran it, the metric as printed and the step time derived
from it (``derivation`` gives the formula).  Fields the source does not state are filled as said in
``assumed``; bf16 rows of the same tables are kept as controls for the fp8 ones.

    python benchmarks/published_recipes.py      # one line per recipe, then counts per source

Sources (every figure below was read in these files or pages; commits of the public repositories):

- [DGXC24] NVIDIA/dgxc-benchmarking release v24.11.1 (commit 35a9aec, imported 2025-06-09; NeMo 24.09
  container, NeMo Launcher), files llama3.1/README_8b.md, README_70b.md, README_405b.md,
  nemotron/README_340b.md, nemo_megatron/README_175b.md: row "Training step time (seconds per step)"
  of the BF16 and FP8 tables (DGX H100); layouts from the table titles and the "maintain these
  values" lists; recompute, sequence parallel, optimizer and fp8 settings from the model yamls of the
  same commit (llama3.1/llama3.1_{8b,70b,405b}.yaml, nemotron/nemotron4-340b-synth.yaml,
  nemo_megatron/gpt3_175b_hydra.yaml).
- [DGXC25] NVIDIA/dgxc-benchmarking release v25.04 (commit 741c886, imported 2025-06-09; NeMo
  25.02.01 container, NeMo 2.0 scripts/performance/llm/pretrain_llama31.py), llama3.1/README.md:
  layout table (Size, Precision, GPUs, SeqLen, Layers, TP, PP, CP, DP, VP, MBS, GBS, GA) and the
  "Training step time (seconds per step)" rows (DGX H100).
- [NEMO24] NVIDIA/NeMo docs/source/performance/performance_summary.md (commit 8e3d65dcfe,
  2024-09-09; NeMo 24.07 container, DGX-H100, "pre-training performance ... at FP8 precision"):
  columns #-GPUs, GBS, MBS, Sequence Length, TP, PP, CP, VP, Tokens / sec / GPU.
- [NEMOLS] NVIDIA/NeMo docs/source/performance/performance_long_sequence.md (commit 19fadb67b0,
  2025-05-09), table "LLAMA2-7B (FP8) - H100" (NeMo 24.03.01 container, DGX-H100): SeqLen (K),
  # of GPUs, Batch Size, and under "With CP" TP, PP, DP, CP, TFLOPS / GPU.
- [MB25] NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md (commit 5776a6d90, 2025-12-10),
  "25.11 NeMo Container", "System: DGX-H100" (FP8-CS = fp8 with current scaling): columns #-GPUs,
  Precision, GBS, MBS, Sequence Length, FSDP, TP, PP, CP, VP, GA, Tokens / sec / GPU; recompute from
  scripts/performance/configs/llama/llama3_workload_base_configs.py and utils/overrides.py of the
  same commit.
- [TT24] pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (added in commit 820504e20,
  2025-06-13; runs of 2024-12 with torchtitan 9dec370, torch 1963fc8, torchao eab345c), Tables 1-6:
  TPS/GPU; Grand Teton H100 96 GB HBM2e at 500 W, 400 Gb/s RDMA per GPU.  Defaults not in the tables
  from torchtitan 9dec370 (train_configs/llama3_*.toml: seq_len 8192; config_manager.py: pipeline
  micro-batches = pp degree, cp rotate method "allgather"; pipelining_utils.py: 2 stages per rank for
  interleaved schedules; train.py: tps = tokens / (time * cp * tp * pp)).
- [TTATP25] pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (commit
  2887250bb, 2025-06-16; torchtitan 820504e, same Grand Teton H100 as [TT24]): "Async TP tokens/sec"
  column (per GPU, torchtitan's tps).
- [TRAINY25] pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (commit
  cbccb3878, 2025-07-11; torchtitan e7c0cae): TPS/GPU at NUM_NODES 4 (8 H200 per host, 400 Gb/s
  per GPU); seq_len 8192 and selective (op) recompute from torchtitan e7c0cae
  torchtitan/models/llama3/train_configs/llama3_8b.toml.

Model shapes: Llama 3/3.1 from torchtitan 9dec370 torchtitan/models/llama/__init__.py (8B: 32 layers,
4096, 32 heads, 8 kv heads, FFN 14336; 70B: 80, 8192, 64, 8, 28672; 405B: 126, 16384, 128, 8, 53248) and
the FLOP notes of [DGXC24] (layers, hidden, FFN, query groups); vocabulary 128256 (Meta's model card;
not in the tables); Llama 2 from Meta's model card; Nemotron-4 340B and GPT-3 175B from the [DGXC24]
yamls.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

# ------------------------------------------------------------------------------------------------
# data types
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A dense decoder as the recipe trained it."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    """unpadded vocabulary (frameworks pad it, e.g. Megatron to a multiple of 128 x tp)"""
    seq_len: int
    """sequence length of this recipe"""
    swiglu: bool
    """gated MLP with three matrices (Llama); False: two matrices (GeLU, squared ReLU)"""
    tied_embeddings: bool
    """input embedding and LM head share one matrix"""
    mlp: str = "swiglu"
    """the activation as named by the source: swiglu, gelu, squared-relu"""


@dataclass(frozen=True)
class Layout:
    """The parallel layout and training settings as published (or as ``Recipe.assumed`` says)."""

    tp: int
    pp: int
    cp: int
    vp: int
    """virtual pipeline stages per rank (interleaved 1F1B); 1 = plain 1F1B or no pipeline"""
    dp: int
    """data-parallel replicas, FSDP shards included (num_gpus / (tp * pp * cp))"""
    mbs: int
    """sequences per micro-batch"""
    global_batch: int
    """sequences per optimizer step (every published gbs here counts sequences, not tokens)"""
    recompute: str
    """none | selective | full"""
    recompute_layers: int | None
    """full recompute of only this many layers per stage (Megatron 'block' method); None: all or none"""
    sp: bool
    """sequence parallel (Megatron) / sequence-sharded norms (torchtitan) with tp > 1"""
    zero: int
    """0: plain DDP; 1: distributed optimizer (Megatron) or ZeRO-1; 3: FSDP / ZeRO-3"""
    fp8: bool
    fp8_recipe: str
    """'' (bf16); delayed | current (tensorwise, per step) | tensorwise | rowwise"""
    cp_comm: str = ""
    """'' without cp; p2p (ring) | allgather"""
    pp_schedule: str = ""
    """'' without pp; 1f1b | interleaved-1f1b"""
    notes: str = ""
    optimizer: str = "adamw"
    """adamw (fp32 state) | adamw-bf16 (16-bit Adam state: NeMo 1's distributed_fused_adam with dtype bf16)"""


@dataclass(frozen=True)
class Recipe:
    name: str
    source: str
    """key of a source in the module docstring, e.g. '[DGXC24]'"""
    row: str
    """table and row (or column) of that source"""
    shape: Shape
    gpu: str
    """h100 | h200 | a100"""
    num_gpus: int
    layout: Layout
    framework: str
    """megatron (Megatron-LM, NeMo, Megatron-Bridge) | torchtitan"""
    framework_version: str
    metric: str
    """the published figure as printed"""
    metric_value: float
    metric_unit: str
    """s/step | tokens/s/GPU | TFLOP/s/GPU"""
    step_time_s: float
    derivation: str
    assumed: str = ""
    """what the source does not state, and what was taken"""
    gpu_note: str = ""
    """where the GPU differs from the catalogue part (memory, power limit, fabric)"""

    @property
    def precision(self) -> str:
        if not self.layout.fp8:
            return "bf16"
        return "fp8-rowwise" if self.layout.fp8_recipe == "rowwise" else "fp8"


# ------------------------------------------------------------------------------------------------
# model shapes
# ------------------------------------------------------------------------------------------------

LLAMA3_8B = Shape("llama3.1-8b", 32, 4096, 32, 8, 14336, 128256, 8192, True, False)
LLAMA3_70B = Shape("llama3.1-70b", 80, 8192, 64, 8, 28672, 128256, 8192, True, False)
LLAMA3_405B = Shape("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192, True, False)
LLAMA2_7B = Shape("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, True, False)
LLAMA2_70B = Shape("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, True, False)
# Llama 3.1 405B as [DGXC24] ran it: llama3.1_405b.yaml sets num_query_groups 16 (Meta's model has 8)
LLAMA3_405B_Q16 = replace(LLAMA3_405B, name="llama3.1-405b-q16", kv_heads=16)
GPT3_175B = Shape("gpt3-175b", 96, 12288, 96, 96, 49152, 51200, 2048, False, True, "gelu")
NEMOTRON4_340B = Shape("nemotron4-340b", 96, 18432, 96, 8, 73728, 256000, 4096, False, False, "squared-relu")

LLAMA3_VOCAB = "vocabulary 128256 (Meta's Llama 3 model card; the tables do not give it)"
TOKENS_NO_PADDING = ("tokens/s/GPU = GBS x seq / (step time x GPUs): every sequence full length "
                     "(synthetic or concatenated pre-training data, no padding)")
MEGATRON_DEFAULTS = ("distributed optimizer (zero=1) and sequence parallel with tp > 1 (NeMo's "
                     "pre-training recipes); no recomputation (not stated)")


def tokens_step_time(global_batch: int, seq_len: int, num_gpus: int, tokens_per_s_per_gpu: float) -> float:
    """Step time from a per-GPU token rate that counts every GPU (NeMo, Megatron-Bridge) or, as torchtitan
    does, the tokens of a data-parallel rank over its cp * tp * pp GPUs: both equal GBS * s / (N * rate)."""
    return global_batch * seq_len / (num_gpus * tokens_per_s_per_gpu)


def nemo_llama2_flops_per_sequence(shape: Shape) -> float:
    """Model FLOPs of one sequence (forward and backward) as NeMo counts them for Llama 2: causal attention
    counted as full, no recomputation: s*l*h^2*(12 + 12*g/a + 18*f/h + 12*s/h + 6*V/(l*h)).

    Checked against [NEMO24]: LLAMA2-7B at 4096, 16934 tokens/s/GPU x this / 4096 = 780 TFLOP/s
    (published 780); LLAMA3-8B at 8192, 12273 tokens/s/GPU gives 711 (published 711)."""
    s, l, h = shape.seq_len, shape.layers, shape.hidden
    return s * l * h * h * (12 + 12 * shape.kv_heads / shape.heads + 18 * shape.ffn_hidden / h
                            + 12 * s / h + 6 * shape.vocab / (l * h))


def _layout(tp: int, pp: int, cp: int, vp: int, dp: int, mbs: int, gbs: int, *, recompute: str = "none",
            recompute_layers: int | None = None, zero: int = 1, fp8: str = "", cp_comm: str = "",
            pp_schedule: str = "", notes: str = "", optimizer: str = "adamw") -> Layout:
    """A layout as read (dp as published, or GPUs / (tp * pp * cp) worked out by hand where the source gives
    only the GPU count); fp8: '' for bf16, else the scaling recipe."""
    return Layout(tp, pp, cp, vp, dp, mbs, gbs, recompute, recompute_layers, tp > 1,
                  zero, bool(fp8), fp8, cp_comm or ("p2p" if cp > 1 else ""),
                  pp_schedule or (("interleaved-1f1b" if vp > 1 else "1f1b") if pp > 1 else ""), notes, optimizer)


# ------------------------------------------------------------------------------------------------
# [DGXC24]: step time published directly
# ------------------------------------------------------------------------------------------------

def _recipes_dgxc24() -> list[Recipe]:
    delayed = "delayed"
    # (name, file and table, shape, GPUs, tp, pp, cp, vp, dp, mbs, gbs, recompute, fp8 recipe, step s, notes);
    # dp: GPUs / (tp * pp * cp), which with the published GA gives the published GBS
    rows = [
        ("llama3.1-8b", "llama3.1/README_8b.md 'Llama 3.1 8b 24.09 BF16'", LLAMA3_8B, 8, 1, 1, 2, 1, 4, 1, 128,
         "none", "", 12.91, ""),
        ("llama3.1-8b", "llama3.1/README_8b.md 'Llama 3.1 8b 24.09 FP8'", LLAMA3_8B, 8, 1, 1, 2, 1, 4, 1, 128,
         "none", delayed, 9.67, ""),
        ("llama3.1-70b", "llama3.1/README_70b.md 'Llama 3.1 70b 24.09 BF16'", LLAMA3_70B, 64, 4, 4, 2, 5, 2, 1,
         128, "none", "", 14.72, ""),
        ("llama3.1-70b", "llama3.1/README_70b.md 'Llama 3.1 70b 24.09 FP8'", LLAMA3_70B, 64, 4, 4, 2, 5, 2, 1,
         128, "none", delayed, 11.01, ""),
        ("llama3.1-70b", "llama3.1/README_70b.md 'Llama 3.1 70b 24.09 FP8'", LLAMA3_70B, 2048, 4, 4, 2, 5, 64, 1,
         4096, "none", delayed, 11.39, ""),
        ("llama3.1-405b", "llama3.1/README_405b.md 'Llama 3.1 405b 24.09 BF16'", LLAMA3_405B_Q16, 576, 8, 9, 2, 7,
         4, 1, 252, "none", "", 17.20, ""),
        ("llama3.1-405b", "llama3.1/README_405b.md 'Llama 3.1 405b 24.09 FP8'", LLAMA3_405B_Q16, 576, 8, 9, 2, 7,
         4, 1, 252, "none", delayed, 11.24, ""),
        ("llama3.1-405b", "llama3.1/README_405b.md 'Llama 3.1 405b 24.09 FP8'", LLAMA3_405B_Q16, 2304, 8, 9, 2, 7,
         16, 1, 1008, "none", delayed, 12.35, ""),
        ("nemotron4-340b", "nemotron/README_340b.md 'Nemotron4 340b 24.11 BF16'", NEMOTRON4_340B, 128, 8, 8, 1, 12,
         2, 1, 32, "selective", "", 4.61, ""),
        ("nemotron4-340b", "nemotron/README_340b.md 'Nemotron4 340b 24.11 FP8'", NEMOTRON4_340B, 128, 8, 8, 1, 12,
         2, 1, 32, "selective", delayed, 3.16, ""),
        ("gpt3-175b", "nemo_megatron/README_175b.md 'NeMo Megatron 24.11 BF16'", GPT3_175B, 128, 4, 8, 1, 12, 4, 1,
         256, "none", "", 8.91, ""),
        ("gpt3-175b", "nemo_megatron/README_175b.md 'NeMo Megatron 24.11 FP8'", GPT3_175B, 128, 4, 8, 1, 12, 4, 1,
         256, "none", delayed, 5.92, "fp8_params: true (fp8 weight copies) in gpt3_175b_hydra.yaml"),
    ]
    out = []
    for name, table, shape, gpus, tp, pp, cp, vp, dp, mbs, gbs, rec, fp8, step, notes in rows:
        prec = "fp8" if fp8 else "bf16"
        assumed = [LLAMA3_VOCAB] if "llama" in name else []
        if name == "gpt3-175b":
            assumed.append("vocabulary 51200 as in the README's FLOP note (GPT-2 BPE 50257, padded by NeMo); "
                           "tied embeddings (NeMo megatron_gpt default; the yaml does not set it)")
        optimizer = "adamw"
        if name == "nemotron4-340b":
            assumed.append("heads 96, query groups 8, FFN 73728, squared-relu, untied: from the yaml")
            optimizer = "adamw-bf16"        # the yaml's optim: dtype: bf16, grad_sync_dtype: bf16
        if fp8:
            assumed.append("fp8 scaling 'delayed': the yamls' fp8_hybrid (E4M3 forward, E5M2 backward), "
                           "amax history 1024, max (the tables only say FP8)")
        assumed.append("recompute from the yaml (activations_checkpoint_granularity)")
        out.append(Recipe(
            f"dgxc24-{name}-{prec}-{gpus}", "[DGXC24]", f"{table}, {gpus}x H100 column", shape, "h100", gpus,
            _layout(tp, pp, cp, vp, dp, mbs, gbs, recompute=rec, fp8=fp8,
                    notes=notes or "distributed_fused_adam (distributed optimizer); overlap_grad_sync, "
                                   "overlap_param_sync" + ("; optimizer state bf16 (optim.dtype)"
                                                           if optimizer != "adamw" else ""),
                    optimizer=optimizer),
            "megatron", "NeMo 24.09 container (NeMo Launcher, Megatron-Core)",
            f"Training step time (seconds per step) {step}", step, "s/step", step, "published step time",
            "; ".join(assumed)))
    return out



# ------------------------------------------------------------------------------------------------
# [DGXC25]: NeMo 2.0 recipes, step time published directly
# ------------------------------------------------------------------------------------------------

NEMO_405B_SPLIT = ("126 layers over pp 8 x vp 8 = 64 chunks: NeMo's llama31_405b recipe (NVIDIA/NeMo 7008dc6dd) sets "
                   "account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split, so the first "
                   "chunk holds the embedding and 1 layer, the last 1 layer and the loss, the others 2 layers")


def _recipes_dgxc25() -> list[Recipe]:
    # (shape, GPUs, tp, pp, cp, vp, DP, gbs, fp8, step s): the layout table's columns (MBS 1 in every row)
    rows = [(LLAMA3_8B, 8, 1, 1, 2, 1, 4, 128, False, 12.27),
            (LLAMA3_8B, 8, 1, 1, 2, 1, 4, 128, True, 9.33),
            (LLAMA3_70B, 64, 4, 4, 2, 5, 2, 128, False, 14.66),
            (LLAMA3_70B, 64, 4, 8, 1, 5, 2, 128, True, 9.86),
            (LLAMA3_405B, 512, 8, 8, 2, 8, 4, 256, False, 19.78),
            (LLAMA3_405B, 512, 8, 8, 2, 8, 4, 256, True, 12.37)]
    out = []
    for shape, gpus, tp, pp, cp, vp, dp, gbs, fp8, step in rows:
        size = shape.name.split("-")[1]
        prec = "fp8" if fp8 else "bf16"
        notes = NEMO_405B_SPLIT if shape is LLAMA3_405B else ""
        out.append(Recipe(
            f"dgxc25-llama3.1-{size}-{prec}-{gpus}", "[DGXC25]",
            f"llama3.1/README.md layout table row {size} {prec.upper()} {gpus}; 'Llama 3.1 {size} "
            f"{prec.upper()}' {gpus}x H100 column", shape, "h100", gpus,
            _layout(tp, pp, cp, vp, dp, 1, gbs, fp8="delayed" if fp8 else "", notes=notes),
            "megatron", "NeMo 25.02.01 container (NeMo 2.0, Megatron-Core)",
            f"Training step time (seconds per step) {step}", step, "s/step", step, "published step time",
            "; ".join([LLAMA3_VOCAB, MEGATRON_DEFAULTS]
                      + (["fp8 scaling 'delayed': NeMo's bf16_with_fp8_mixed of 2025-02 (NVIDIA/NeMo 7008dc6dd "
                          "nemo/collections/llm/recipes/precision/mixed_precision.py: hybrid, amax history "
                          "1024, max, fp8_params)"] if fp8 else []))))
    return out


# ------------------------------------------------------------------------------------------------
# [NEMO24]: tokens/s/GPU
# ------------------------------------------------------------------------------------------------

def _recipes_nemo24() -> list[Recipe]:
    # (row, shape, GPUs, gbs, mbs, tp, pp, cp, vp, dp = GPUs / (tp * pp * cp), tokens/s/GPU)
    rows = [("LLAMA3-8B", LLAMA3_8B, 8, 128, 1, 1, 1, 2, 1, 4, 12273),
            ("LLAMA3-70B", LLAMA3_70B, 64, 128, 1, 4, 4, 2, 5, 2, 1524),
            ("LLAMA2-70B", LLAMA2_70B, 64, 128, 1, 4, 4, 1, 20, 4, 1728),
            ("GPT3-175B", GPT3_175B, 512, 2048, 2, 4, 8, 1, 6, 16, 825)]
    out = []
    for row, shape, gpus, gbs, mbs, tp, pp, cp, vp, dp, tps in rows:
        assumed = [TOKENS_NO_PADDING, MEGATRON_DEFAULTS,
                   "fp8 scaling 'delayed' (the NeMo 24.07 default: hybrid, amax history 1024; not stated)"]
        if "LLAMA3" in row:
            assumed.insert(0, LLAMA3_VOCAB + "; Llama 3 8B/70B shapes as Llama 3.1")
        if row == "GPT3-175B":
            assumed.insert(0, "vocabulary 51200 and tied embeddings as in [DGXC24]")
        if row == "LLAMA2-70B":
            assumed.insert(0, "Llama 2 70B shape from Meta's model card (vocabulary 32000)")
        out.append(Recipe(
            f"nemo24-{shape.name}-fp8-{gpus}", "[NEMO24]", f"Pretraining table, row {row} ({gpus} GPUs)", shape,
            "h100", gpus, _layout(tp, pp, cp, vp, dp, mbs, gbs, fp8="delayed"), "megatron",
            "NeMo 24.07 container", f"Tokens / sec / GPU {tps}", tps, "tokens/s/GPU",
            tokens_step_time(gbs, shape.seq_len, gpus, tps), f"{gbs} x {shape.seq_len} / ({gpus} x {tps})",
            "; ".join(assumed)))
    return out


# ------------------------------------------------------------------------------------------------
# [NEMOLS]: long sequences, TFLOP/s per GPU
# ------------------------------------------------------------------------------------------------

def _recipes_nemols() -> list[Recipe]:
    # (SeqLen (K), GPUs, batch size, tp, pp, dp, cp, TFLOPS/GPU with CP)
    rows = [(16, 16, 256, 2, 1, 8, 1, 660), (32, 32, 128, 2, 1, 8, 2, 610), (128, 128, 32, 4, 1, 8, 4, 555),
            (512, 512, 8, 8, 1, 4, 16, 549), (1024, 1024, 4, 8, 1, 4, 32, 536)]
    out = []
    for k, gpus, gbs, tp, pp, dp, cp, tflops in rows:
        shape = replace(LLAMA2_7B, seq_len=k * 1024)
        lay = _layout(tp, pp, cp, 1, dp, 1, gbs, fp8="delayed")
        flops = nemo_llama2_flops_per_sequence(shape)
        out.append(Recipe(
            f"nemols-llama2-7b-{k}k-fp8-{gpus}", "[NEMOLS]",
            f"'LLAMA2-7B (FP8) - H100', SeqLen {k}K row, With CP", shape, "h100", gpus, lay, "megatron",
            "NeMo 24.03.01 container", f"TFLOPS / GPU {tflops}", tflops, "TFLOP/s/GPU",
            gbs * flops / (gpus * tflops * 1e12),
            f"{gbs} x F(s={k * 1024}) / ({gpus} x {tflops} TFLOP/s), F = nemo_llama2_flops_per_sequence "
            f"= {flops:.4g}",
            "FLOP count: NeMo's Llama 2 formula with causal attention counted in full (the page does not give "
            "it; it reproduces the 4K figures of [NEMO24]; if the long-sequence rows had halved the causal "
            "attention the step time would be up to ~2x shorter at 1M); 'Batch Size' read as sequences "
            "(4M tokens in every row); micro-batch 1; no recomputation, distributed optimizer, fp8 'delayed' "
            "(not stated); cp exchange p2p ring (Megatron's default)"))
    return out


# ------------------------------------------------------------------------------------------------
# [MB25]: Megatron-Bridge 25.11, tokens/s/GPU
# ------------------------------------------------------------------------------------------------

def _recipes_mb25() -> list[Recipe]:
    # (row, shape, GPUs, gbs, tp, pp, cp, vp, dp = GPUs / (tp * pp * cp), tokens/s/GPU); MBS 1 in every row
    rows = [("LLAMA3_8B", LLAMA3_8B, 8, 128, 1, 1, 1, 1, 8, 14451),
            ("LLAMA3_70B", LLAMA3_70B, 64, 128, 4, 8, 1, 5, 2, 1602),
            ("LLAMA3.1_405B", LLAMA3_405B, 1024, 512, 8, 8, 2, 8, 8, 292)]
    out = []
    for row, shape, gpus, gbs, tp, pp, cp, vp, dp, tps in rows:
        fsdp = row == "LLAMA3_8B"
        lay = _layout(tp, pp, cp, vp, dp, 1, gbs, fp8="current", zero=3 if fsdp else 1,
                      recompute="full" if fsdp else "none", recompute_layers=5 if fsdp else None,
                      notes="Megatron-FSDP (table FSDP 8); full recompute of 5 layers, method block "
                            "(llama3_workload_base_configs.py: recompute_num_layers=5; overrides.py)"
                      if fsdp else NEMO_405B_SPLIT if shape is LLAMA3_405B else "")
        out.append(Recipe(
            f"mb25-{shape.name}-fp8cs-{gpus}", "[MB25]", f"25.11, DGX-H100 table, row {row} FP8-CS", shape, "h100",
            gpus, lay, "megatron", "NeMo 25.11 container (Megatron-Bridge)", f"Tokens / sec / GPU {tps}", tps,
            "tokens/s/GPU", tokens_step_time(gbs, shape.seq_len, gpus, tps),
            f"{gbs} x {shape.seq_len} / ({gpus} x {tps})",
            "; ".join([LLAMA3_VOCAB, TOKENS_NO_PADDING]
                      + ([] if fsdp else [MEGATRON_DEFAULTS])
                      + (["405B pipeline split as NeMo's recipe (Megatron-Bridge's is taken to be the same)"]
                         if shape is LLAMA3_405B else []))))
    return out


# ------------------------------------------------------------------------------------------------
# torchtitan: [TT24], [TTATP25], [TRAINY25], TPS/GPU
# ------------------------------------------------------------------------------------------------

GRAND_TETON = "H100 SXM with 96 GB HBM2e at a 500 W power limit (Grand Teton); 400 Gb/s RDMA per GPU"


def _tt(name: str, source: str, row: str, shape: Shape, gpu: str, gpus: int, lay: Layout, version: str,
        tps: float, assumed: str, gpu_note: str) -> Recipe:
    return Recipe(
        name, source, row, shape, gpu, gpus, lay, "torchtitan", version, f"TPS/GPU {tps:,}", tps, "tokens/s/GPU",
        tokens_step_time(lay.global_batch, shape.seq_len, gpus, tps),
        f"{lay.global_batch} x {shape.seq_len} / ({gpus} x {tps}) (torchtitan's tps counts a data-parallel "
        f"rank's tokens over its cp*tp*pp GPUs)", assumed, gpu_note)


def _recipes_torchtitan() -> list[Recipe]:
    v24 = "torchtitan 9dec370 (2024-12-26), torch 1963fc8, torchao eab345c; torch.compile"
    tw = "tensorwise"
    fp8_note = "fp8 'tensorwise': torchao Float8Linear dynamic per-tensor scaling (the table says Float8)"
    fsdp_pp = "FSDP2 without resharding after forward under pp (torchtitan 9dec370 apply_fsdp)"
    out = [
        _tt("tt24-llama3.1-8b-bf16-8", "[TT24]", "Table 1, 'FSDP + torch.compile'", LLAMA3_8B, "h100", 8,
            _layout(1, 1, 1, 1, 8, 2, 16, recompute="selective", zero=3), v24, 6667,
            "seq 8192 (llama3_8b.toml); selective = torchtitan's per-op policy", GRAND_TETON),
        _tt("tt24-llama3.1-8b-fp8-8", "[TT24]", "Table 1, 'FSDP + torch.compile + Float8'", LLAMA3_8B, "h100", 8,
            _layout(1, 1, 1, 1, 8, 2, 16, recompute="selective", zero=3, fp8=tw), v24, 8532,
            "seq 8192 (llama3_8b.toml); " + fp8_note, GRAND_TETON),
        _tt("tt24-llama3.1-70b-fp8-256", "[TT24]", "Table 4, '2D + AsyncTP'", LLAMA3_70B, "h100", 256,
            _layout(8, 1, 1, 1, 32, 16, 512, recompute="full", zero=3, fp8=tw, notes="async TP"), v24, 876,
            "seq 8192 (llama3_70b.toml); micro-batch = local batch 16 (no pipeline); " + fp8_note, GRAND_TETON),
        _tt("tt24-llama3.1-405b-fp8-512", "[TT24]", "Table 5, 'Interleaved 1F1B'", LLAMA3_405B, "h100", 512,
            _layout(8, 8, 1, 2, 8, 4, 256, recompute="full", zero=3, fp8=tw,
                    notes=f"async TP; {fsdp_pp}; 126 layers over 16 stages: 7 (with the embedding), 14 x 8, "
                          "7 (with the head) (generate_split_points)"), v24, 128,
            "seq 8192 (llama3_405b.toml); local batch 32 in 8 micro-batches of 4 (default: as many as pp); "
            "vp 2 (default stages per rank of interleaved schedules); fp8 all-gather under FSDP "
            "(llama3_405b.toml); " + fp8_note, GRAND_TETON),
        _tt("tt24-llama3.1-8b-fp8-cp2-64k", "[TT24]", "Table 2, 'FSDP 4, CP 2', 65536",
            replace(LLAMA3_8B, seq_len=65536), "h100", 8, _layout(1, 1, 2, 1, 4, 1, 4, recompute="full", zero=3, fp8=tw, cp_comm="allgather"), v24,
            2540, "cp exchange 'allgather' (torchtitan 9dec370 default rotate method); " + fp8_note, GRAND_TETON),
        _tt("tt24-llama3.1-8b-fp8-cp8-256k", "[TT24]", "Table 2, 'FSDP 1, CP 8', 262144",
            replace(LLAMA3_8B, seq_len=262144), "h100", 8,
            _layout(1, 1, 8, 1, 1, 1, 1, recompute="full", zero=3, fp8=tw, cp_comm="allgather"), v24, 548,
            "cp exchange 'allgather' (torchtitan default); FSDP over the cp ranks; " + fp8_note, GRAND_TETON),
        _tt("tt24-llama3.1-405b-fp8-cp8-256k", "[TT24]", "Table 6, 'FSDP 1, CP 8', 262144",
            replace(LLAMA3_405B, seq_len=262144), "h100", 512,
            _layout(8, 8, 8, 1, 1, 1, 8, recompute="full", zero=3, fp8=tw, cp_comm="allgather",
                    notes=f"async TP; {fsdp_pp}; 126 layers over 8 stages: 15 (with the embedding), 6 x 16, "
                          "15 (with the head) (generate_split_points)"), v24, 16,
            "local batch 8 in 8 micro-batches of 1 (default: as many as pp); cp exchange 'allgather' "
            "(torchtitan default); " + fp8_note, GRAND_TETON),
    ]
    v25 = "torchtitan 820504e (2025-06-13), torch 38410cf9, torchao 6243040; torch.compile"
    for quant, tps in (("", 652.4), (tw, 942.4), ("rowwise", 624.8)):
        label = {"": "None (bfloat16)", tw: "float8 tensorwise", "rowwise": "float8 rowwise"}[quant]
        out.append(_tt(
            f"ttatp25-llama3.1-70b-{quant or 'bf16'}-256", "[TTATP25]",
            f"'Llama3 70b on 256 H100s', row '{label}', Async TP column", LLAMA3_70B, "h100", 256,
            _layout(8, 1, 1, 1, 32, 16, 512, recompute="full", zero=3, fp8=quant, notes="async TP"), v25, tps,
            "seq 8192 (llama3_70b.toml of torchtitan 820504e); global batch 16 x 32 FSDP ranks"
            + (f"; fp8 '{quant}' as the row names it" if quant else ""), GRAND_TETON))
    out.append(_tt(
        "trainy25-llama3.1-8b-fp8-32", "[TRAINY25]", "Results, NUM_NODES 4", LLAMA3_8B, "h200", 32,
        _layout(1, 1, 1, 1, 32, 2, 64, recompute="selective", zero=3, fp8=tw,
                notes="fp8 all-gather under FSDP, precomputed dynamic scales, fp8 weights recomputed in backward"),
        "torchtitan e7c0cae (2025-06-13), torch 2.8.0a0+5228986c39, torchao 0afa4c1; torch.compile", 10938,
        "seq 8192 and per-op selective recompute from llama3_8b.toml (e7c0cae); " + fp8_note,
        "H200 (141 GB), CX-7 400 Gb/s per GPU (WhiteFiber)"))
    return out


# ------------------------------------------------------------------------------------------------

def recipes() -> list[Recipe]:
    return (_recipes_dgxc24() + _recipes_dgxc25() + _recipes_nemo24() + _recipes_nemols() + _recipes_mb25()
            + _recipes_torchtitan())


RECIPES: list[Recipe] = recipes()


def main() -> int:
    for r in RECIPES:
        lay = r.layout
        desc = (f"tp{lay.tp} pp{lay.pp} cp{lay.cp} vp{lay.vp} dp{lay.dp} mbs{lay.mbs} gbs{lay.global_batch} "
                f"{lay.recompute}{'' if lay.recompute_layers is None else f'({lay.recompute_layers})'} "
                f"zero{lay.zero} {r.precision}{f'/{lay.fp8_recipe}' if lay.fp8 else ''}")
        print(f"{r.name:<36} {r.gpu:<5} {r.num_gpus:>5} s={r.shape.seq_len:<8} {desc:<70} {r.step_time_s:>8.3f} s")
    print(f"\n{len(RECIPES)} recipes")
    for src in sorted({r.source for r in RECIPES}):
        sub = [r for r in RECIPES if r.source == src]
        print(f"  {src:<11} {len(sub):>2}: fp8 {sum(r.layout.fp8 for r in sub)}, bf16 "
              f"{sum(not r.layout.fp8 for r in sub)}, cp>1 {sum(r.layout.cp > 1 for r in sub)}")
    print(f"  all         {len(RECIPES):>2}: fp8 {sum(r.layout.fp8 for r in RECIPES)}, bf16 "
          f"{sum(not r.layout.fp8 for r in RECIPES)}, cp>1 {sum(r.layout.cp > 1 for r in RECIPES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
