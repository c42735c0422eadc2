"""Published training runs, costed with their published layout: predicted vs published step time.

    python benchmarks/published_runs.py              # every run, with the free solve beside each
    python benchmarks/published_runs.py --no-free    # only the published layouts (fast)

Each run below is a GPT- or Llama-style model trained on A100 or H100 GPUs, with its source (paper
and table, or repository file and commit, or URL and date), its layout as published (tp, pp, vp,
dp, micro-batch, global batch, sequence length, recomputation, sequence parallel, ZeRO, precision),
the software that ran it (``autoplan/profile/assumptions.py``: kernels and overlap) and the step
time as published, or derived from published throughput with the formula given beside it.
Where a source is silent on a field the run says what was assumed (``assumed``).

For each run the script prints the step time ``autoplan estimate`` predicts for the published
layout (analytic profile of the catalogue hardware, the run's software stack), the error, whether
the layout is predicted to fit in memory, and the step time of the free solve (same model, cluster,
batch and software; the published degrees not imposed): it must be no slower.

Two constants of the model were taken from these runs: the sustained fraction of each chip
(``assumptions.KernelAssumptions.sustained_fraction``, fitted on the 2021-24 runs) and how much faster
Megatron-Core's 2025 release runs the same layouts than its 2024 one
(``assumptions.MEGATRON_2025_RELEASE_SPEEDUP``: the published step times of every pair of runs of the
same setup, one by each release, over the model's own ratio; :func:`derived_release_speedup`); every
other constant cites its evidence (``assumptions.py``, ``hardware.py``).  The LEAVE-ONE-SOURCE-OUT line
predicts each run with both taken from the other sources' runs.  To show how the fraction's fit
generalises, the script also fits one fraction on the A100 runs and reports its error on the H100
runs (and the reverse), and per chip refits it leaving out each run, then each source, in turn.
Last it prints the fraction each run implies (the one at which its prediction equals its published
time), grouped by source, framework and precision, and per chip the band of one fraction that would
keep every run within 20% (``implied_fraction_report``): where that band is empty, no value of the
one fitted constant meets a 20% maximum, whatever it is fitted on.

Verified sources (read through the repository mirrors and pages available to the author):

- [SC21]  Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM" (SC'21), Table 1 (teraFLOP/s per GPU, as reproduced in the Megatron-LM
  README image images/cases_april2021.png); layouts from NVIDIA/Megatron-LM
  examples/sc21/run_table_1.sh (commit de7dc40f88, 2021-08-10).  Step time from the paper's
  FLOP count (Eq. 3): F = 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)), t = F / (GPUs * X).
- [RAR22] Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", Table 5 (iteration time, full recompute vs sequence parallel + selective) and Table 3
  (configurations), as transcribed in calculon-ai/calculon calculon/llm/validation.py and
  validation/seqsel/tab5/*.json (the paper itself was not reachable; vocabulary 51200 assumed,
  as in [SC21]).
- [BLOOM] BigScience tr11-176B-ml: layout and flags from train/tr11-176B-ml/tr11-176B-ml.slurm
  (bigscience-workshop/bigscience), pipeline partition and hardware from train/tr11-176B-ml
  README/chronicles; iteration time 105.22 s from the log line quoted in the chronicles
  (iteration 12695, global batch 2048).
- [MPT]   mosaicml/llm-foundry scripts/train/benchmarking/README.md (commit 5e85bd62d, 2024-01-06
  for the H100 >= 128 GPU table; the other tables as of 2023-10): step time = GlobalBatchSize(T) /
  Throughput(T/s); model shapes from scripts/train/yamls/pretrain/mpt-*.yaml, sweep settings from
  scripts/train/benchmarking/sweep.py and submit_benchmarks.py.
- [TT]    pytorch/torchtitan docs/performance.md (commit 395a52627, 2024-04-18), 64 A100 80GB,
  FSDP2: step time = local batch * seq / WPS (tokens per second per GPU).
- [MCORE] NVIDIA/Megatron-LM README "Performance Benchmarking" (Megatron-Core r0.8.0, commit
  f2e5db402c, 2024-07-15): images/model_table.png (per-GPU teraFLOP/s), "Benchmark Configuration"
  (vocabulary 131072, sequence 4096, DP/TP/PP overlap on), H100; the rows without pipeline
  parallelism (the micro-batch and virtual stages of the others are not published).
"""

from __future__ import annotations

import argparse
import atexit
import functools
import math
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from autoplan.errors import AutoplanError  # noqa: E402
from autoplan.jsonio import write_json_atomic  # noqa: E402
from autoplan.models.shapes import BUILTIN_SHAPES, ModelShape  # noqa: E402
from autoplan.plan.api import estimate, fixed_micro_batch, make_problem  # noqa: E402
from autoplan.plan.frameworks import framework as framework_named  # noqa: E402
from autoplan.plan.plan import Layout, Prediction  # noqa: E402
from autoplan.plan.search import SearchOptions, search  # noqa: E402
from autoplan.profile.assumptions import KERNELS  # noqa: E402

import published_recipes  # noqa: E402  (benchmarks/published_recipes.py: the 2024-25 fp8 / cp recipes)


@dataclass(frozen=True)
class PublishedRun:
    name: str
    source: str
    model: ModelShape
    cluster: str
    """catalogue spec NAME:NODES"""
    layout: dict
    """published layout fields as ``--layout`` keys: tp, pp, cp, dp, vp, mbs, recompute, sp, zero (and
    stage_blocks, recompute_every, recompute_first); ``mbs=None``: the source does not state the
    micro-batch size (:func:`with_tuned_mbs`)"""
    global_batch: int
    precision: str
    framework: str
    """``--framework`` of the software that ran it (:mod:`autoplan.plan.frameworks`)"""
    step_time_s: float
    derivation: str
    assumed: str = ""
    """fields the source does not state, and what was taken"""
    optimizer: str = "adamw"
    """``--optimizer`` (adamw-bf16 where the recipe keeps 16-bit Adam state)"""

    @property
    def hardware(self) -> str:
        return "H100" if "h100" in self.cluster else ("H200" if "h200" in self.cluster else "A100")

    @property
    def source_key(self) -> str:
        return self.source.split("]")[0] + "]"

    @property
    def gpus(self) -> int:
        name, _, nodes = self.cluster.partition(":")
        return 8 * int(nodes)


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200, seq: int = 2048) -> ModelShape:
    return ModelShape(name, layers, hidden, heads, heads, 4 * hidden, vocab, seq)


def _sc21_time(b: int, l: int, h: int, gpus: int, tflops: float, s: int = 2048, v: int = 51200) -> float:
    """[SC21] Eq. 3 (FLOPs with activation recomputation) over the published per-GPU rate."""
    return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)) / (gpus * tflops * 1e12)


def _runs_sc21() -> list[PublishedRun]:
    # (size, heads, hidden, layers, tp, pp, mbs, gbs, nodes, layers per virtual stage, DDP impl, TFLOP/s)
    rows = [("1.7B", 24, 2304, 24, 1, 1, 16, 512, 4, None, "torch", 137),
            ("3.6B", 32, 3072, 30, 2, 1, 16, 512, 8, None, "torch", 138),
            ("7.5B", 32, 4096, 36, 4, 1, 16, 512, 16, None, "torch", 142),
            ("18B", 48, 6144, 40, 8, 1, 8, 1024, 32, None, "torch", 135),
            ("39B", 64, 8192, 48, 8, 2, 4, 1536, 64, None, "local", 138),
            ("76B", 80, 10240, 60, 8, 4, 2, 1792, 128, 5, "local", 140),
            ("145B", 96, 12288, 80, 8, 8, 2, 2304, 192, 5, "local", 148),
            ("310B", 128, 16384, 96, 8, 16, 1, 2160, 240, 3, "local", 155),
            ("530B", 128, 20480, 105, 8, 35, 1, 2520, 315, 1, "local", 163),
            ("1T", 160, 25600, 128, 8, 64, 1, 3072, 384, None, "local", 163)]
    out = []
    for size, a, h, l, tp, pp, mbs, gbs, nodes, per_vs, ddp, tflops in rows:
        gpus = 8 * nodes
        vp = l // pp // per_vs if per_vs else 1
        framework = "megatron@2021-torch-ddp" if ddp == "torch" else "megatron@2021"
        out.append(PublishedRun(
            f"megatron-{size}", f"[SC21] Table 1 row {size}; examples/sc21/run_table_1.sh MODEL_SIZE={size}",
            _gpt(f"megatron-{size}", l, h, a), f"dgx-a100-80gb:{nodes}",
            dict(tp=tp, pp=pp, dp=gpus // (tp * pp), vp=vp, mbs=mbs, recompute="full", sp=0, zero=0),
            gbs, "fp16", framework, _sc21_time(gbs, l, h, gpus, tflops),
            f"96*B*s*l*h^2*(1+s/6h+V/16lh) / ({gpus} GPUs x {tflops} TFLOP/s)"))
    return out


def _runs_rar22() -> list[PublishedRun]:
    # (name, heads, hidden, layers, tp, pp, gpus, batch, mbs, vp, full s, seq+sel s)
    rows = [("22B", 64, 6144, 48, 8, 1, 8, 4, 4, 1, 1.42, 1.10),
            ("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 3, 18.13, 13.75),
            ("530B", 128, 20480, 105, 8, 35, 280, 280, 1, 3, 49.05, 37.83),
            ("1T", 160, 25600, 128, 8, 64, 512, 512, 1, 1, 94.42, 71.49)]
    out = []
    for name, a, h, l, tp, pp, gpus, gbs, mbs, vp, full_s, seqsel_s in rows:
        for mode, t, rec, sp in (("full", full_s, "full", 0), ("seq+sel", seqsel_s, "selective", 1)):
            out.append(PublishedRun(
                f"rar22-{name}-{mode}", f"[RAR22] Table 5, {name}, {'full recompute' if sp == 0 else 'present work'}",
                _gpt(f"rar22-{name}", l, h, a), f"dgx-a100-80gb:{gpus // 8}",
                dict(tp=tp, pp=pp, dp=gpus // (tp * pp), vp=vp, mbs=mbs, recompute=rec, sp=sp, zero=0),
                gbs, "bf16", "megatron@2022", t, "published iteration time",
                assumed="vocabulary 51200; vp from calculon's transcription of Table 3"))
    return out


def _run_bloom() -> PublishedRun:
    shape = ModelShape("bloom-176b", 70, 14336, 112, 112, 4 * 14336, 250880, 2048)
    # --pp-partition-method 'type:transformer|embedding': [embed | 5 blocks] [6 blocks] x 10 [5 blocks | head]
    blocks = [5] + [6] * 10 + [5]
    return PublishedRun(
        "bloom-176b", "[BLOOM] tr11-176B-ml.slurm (TP 4, PP 12, MBS 2, GBS 2048, bf16, --checkpoint-activations, "
                      "ZeRO-1 equivalent); chronicles: 105.22 s/iteration",
        shape, "jean-zay-a100-80gb:48",
        dict(tp=4, pp=12, dp=8, vp=1, mbs=2, recompute="full", sp=0, zero=1, stage_blocks=blocks),
        2048, "bf16", "deepspeed", 105.22, "published iteration time",
        assumed="NVLink as DGX A100; Omni-Path at the catalogue's ib_efficiency")


def _mpt(name: str, layers: int, hidden: int, heads: int) -> ModelShape:
    return ModelShape(f"mpt-{name}", layers, hidden, heads, heads, 4 * hidden, 50368, 2048)


MPT = {"1b": _mpt("1b", 24, 2048, 16), "3b": _mpt("3b", 32, 2560, 20), "7b": _mpt("7b", 32, 4096, 32),
       "13b": _mpt("13b", 40, 5120, 40), "30b": _mpt("30b", 48, 7168, 56), "70b": _mpt("70b", 80, 8192, 64)}


def _runs_mpt() -> list[PublishedRun]:
    # (table, model, gpus, mbs, grad accum, global batch (sequences), tokens/s, activation ckpt, sharding)
    rows = [("A100 80GB (1600 Gbps RoCE)", "1b", 8, 14, 4, 448, 164109, False, "FULL_SHARD"),
            ("A100 80GB (1600 Gbps RoCE)", "3b", 8, 10, 2, 160, 86491, False, "FULL_SHARD"),
            ("A100 80GB (1600 Gbps RoCE)", "7b", 8, 6, 2, 96, 37130, False, "FULL_SHARD"),
            ("A100 80GB (1600 Gbps RoCE)", "13b", 8, 2, 3, 48, 18097, False, "FULL_SHARD"),
            ("A100 80GB (1600 Gbps RoCE)", "30b", 8, 3, 21, 504, 7330, True, "FULL_SHARD"),
            ("A100 80GB (1600 Gbps RoCE)", "70b", 64, 8, 4, 2048, 26274, True, "FULL_SHARD"),
            ("H100 80GB BF16", "7b", 8, 6, 1, 48, 85144, False, "FULL_SHARD"),
            ("H100 80GB BF16", "13b", 8, 2, 1, 16, 38336, False, "FULL_SHARD"),
            ("H100 80GB BF16", "30b", 8, 3, 21, 504, 16022, True, "FULL_SHARD"),
            ("H100 80GB BF16", "70b", 64, 8, 4, 2048, 66523, True, "FULL_SHARD")]
    for gpus in (128, 512):
        rows += [("H100 80GB BF16 (>= 128 GPUs)", m, gpus, mbs, 1, gpus * mbs, tps, ac, shard)
                 for m, mbs, ac, shard, tps in (
                     ("1b", 12, False, "SHARD_GRAD_OP", {128: 5647854, 512: 20396905}[gpus]),
                     ("3b", 8, False, "SHARD_GRAD_OP", {128: 2998098, 512: 11092218}[gpus]),
                     ("7b", 6, False, "FULL_SHARD", {128: 1340830, 512: 4951479}[gpus]),
                     ("13b", 16, True, "FULL_SHARD", {128: 650264, 512: 2535811}[gpus]),
                     ("30b", 8, True, "FULL_SHARD", {128: 281491, 512: 1083366}[gpus]),
                     ("70b", 8, True, "FULL_SHARD", {128: 135490, 512: 515636}[gpus]))]
    out = []
    for table, m, gpus, mbs, ga, gbs, tps, ac, shard in rows:
        hw = "h100" if "H100" in table else "a100"
        tokens = gbs * 2048
        out.append(PublishedRun(
            f"mpt-{m}-{hw}-{gpus}", f"[MPT] table '{table}', {m}, {gpus} GPUs", MPT[m],
            f"dgx-{hw}-80gb:{gpus // 8}",
            dict(tp=1, pp=1, dp=gpus, vp=1, mbs=mbs, recompute="full" if ac else "none", sp=0,
                 zero=3 if shard == "FULL_SHARD" else 2),
            gbs, "bf16", "composer", tokens / tps, f"{tokens} tokens / {tps} tokens/s",
            assumed="" if hw == "a100" else "fabric as DGX H100 (8 x 400 Gb/s per node; the table does not say)"))
    return out


def _runs_torchtitan() -> list[PublishedRun]:
    l3_8b, l3_70b = BUILTIN_SHAPES["llama3-8b"], BUILTIN_SHAPES["llama3-70b"]
    l2_13b, l2_70b = BUILTIN_SHAPES["llama2-13b"], BUILTIN_SHAPES["llama2-70b"]
    # (name, shape, local batch, recompute, every N-th block fully recomputed, WPS)
    rows = [("llama3-8b-sel-layer", l3_8b, 1, "none", 2, 2904),
            ("llama3-70b-full", l3_70b, 1, "full", 0, 331),
            ("llama2-13b-none", l2_13b, 2, "none", 0, 2162),
            ("llama2-70b-full", l2_70b, 2, "full", 0, 353)]
    out = []
    for name, shape, bs, rec, layers, wps in rows:
        lay = dict(tp=1, pp=1, dp=64, vp=1, mbs=bs, recompute=rec, sp=0, zero=3)
        if layers:
            lay["recompute_every"] = layers
        out.append(PublishedRun(
            f"torchtitan-{name}", f"[TT] 64 A100, FSDP2, {shape.name}, batch {bs}, WPS {wps}", shape,
            "dgx-a100-80gb:8", lay, 64 * bs, "bf16", "torchtitan", bs * shape.seq_len / wps,
            f"{bs} x {shape.seq_len} tokens / {wps} tokens/s per GPU",
            assumed="fabric as DGX A100 (8 x 200 Gb/s per node; the page does not say)"
                    + ("; 'selective layer' = every other block fully recomputed" if layers else "")))
    return out


def _mcore_time(b: int, l: int, h: int, gpus: int, tflops: float, s: int = 4096, v: int = 131072) -> float:
    """[MCORE] Megatron's num_floating_point_operations (core_r0.8.0 training.py; no recompute, GeLU,
    no GQA): 12*B*s*l*h^2*(6 + s/h + V/(2*l*h)), over the published per-GPU rate."""
    return 12 * b * s * l * h * h * (6 + s / h + v / (2 * l * h)) / (gpus * tflops * 1e12)


def _runs_mcore() -> list[PublishedRun]:
    # (size, heads, hidden, layers, tp, gpus, batch, TFLOP/s): the rows without pipeline parallelism
    rows = [("1.7B", 16, 2048, 24, 1, 48, 192, 408.8), ("7.1B", 32, 4096, 30, 2, 96, 192, 465.9),
            ("16B", 48, 6144, 32, 4, 192, 192, 489.1), ("32B", 56, 7168, 48, 8, 384, 192, 459.6)]
    out = []
    for size, a, h, l, tp, gpus, gbs, tflops in rows:
        out.append(PublishedRun(
            f"mcore-{size}", f"[MCORE] images/model_table.png row {size}", _gpt(f"mcore-{size}", l, h, a, 131072, 4096),
            f"dgx-h100-80gb:{gpus // 8}",
            dict(tp=tp, pp=1, dp=gpus // tp, vp=1, mbs=None, recompute="none", sp=1 if tp > 1 else 0, zero=1),
            gbs, "bf16", "megatron@2024", _mcore_time(gbs, l, h, gpus, tflops),
            f"12*B*s*l*h^2*(6+s/h+V/2lh) / ({gpus} GPUs x {tflops} TFLOP/s)",
            assumed="micro-batch size not stated: the one a tuned benchmark would run (with_tuned_mbs); no "
                    "recomputation (not stated); distributed optimizer (zero=1) and sequence "
                    "parallel implied by --overlap-param-gather and --tp-comm-overlap"))
    return out


def _recipe_run(r: "published_recipes.Recipe") -> PublishedRun:
    """A 2024-25 recipe of ``published_recipes.py`` as a published run (same fields, autoplan's names)."""
    sh, lay = r.shape, r.layout
    shape = ModelShape(sh.name, sh.layers, sh.hidden, sh.heads, sh.kv_heads, sh.ffn_hidden, sh.vocab, sh.seq_len,
                       mlp="swiglu" if sh.swiglu else "gelu")
    layout = dict(tp=lay.tp, pp=lay.pp, cp=lay.cp, dp=lay.dp, vp=lay.vp, mbs=lay.mbs, recompute=lay.recompute,
                  sp=int(lay.sp), zero=lay.zero)
    if lay.recompute_layers:                     # Megatron's block method: full recompute of the first N
        layout.update(recompute="none", recompute_first=lay.recompute_layers)
    old = "NeMo 24" in r.framework_version      # Megatron-Core 0.8-0.9 (2024); NeMo 25.x: 2025
    framework = {"megatron": "megatron@2024" if old else "megatron",
                 "torchtitan": "torchtitan@2024-async-tp" if "async TP" in lay.notes else "torchtitan"}[r.framework]
    notes = []
    if r.framework == "torchtitan" and lay.pp > 1 and lay.zero == 3:
        # torch.distributed.pipelining keeps FSDP's parameters gathered from the first forward to the
        # last backward of a step (no reshard between micro-batches): ZeRO-2's traffic and memory
        layout["zero"] = 2
        notes.append("FSDP under torch pipelining keeps parameters gathered over the step: costed as zero=2")
    system = {"h100": "dgx-h100-80gb", "h200": "dgx-h200-141gb", "a100": "dgx-a100-80gb"}[r.gpu]
    assumed = "; ".join(x for x in (r.assumed, r.gpu_note, *notes, "" if sh.swiglu else f"{sh.mlp} MLP costed as GeLU's "
                                    "two matrices", "embeddings tied in the source: the head is counted apart"
                                    if sh.tied_embeddings else "") if x)
    return PublishedRun(r.name, f"{r.source} {r.row}", shape, f"{system}:{r.num_gpus // 8}", layout,
                        lay.global_batch, r.precision, framework, r.step_time_s, r.derivation, assumed=assumed,
                        optimizer=lay.optimizer)


def _runs_recipes() -> list[PublishedRun]:
    return [_recipe_run(r) for r in published_recipes.RECIPES]


def published_runs() -> list[PublishedRun]:
    return (_runs_sc21() + _runs_rar22() + [_run_bloom()] + _runs_mpt() + _runs_torchtitan()
            + _runs_mcore() + _runs_recipes())


# --------------------------------------------------------------------------------------------
# costing: exactly what `autoplan estimate --framework` does (estimate_argv gives the command)
# --------------------------------------------------------------------------------------------

_SHAPES_DIR: Path | None = None


def shape_file(shape: ModelShape) -> Path:
    """The run's model as a shape JSON file (what a user gives ``--model``), written once per process."""
    global _SHAPES_DIR
    if _SHAPES_DIR is None:
        _SHAPES_DIR = Path(tempfile.mkdtemp(prefix="autoplan-published-shapes-"))
        atexit.register(shutil.rmtree, _SHAPES_DIR, ignore_errors=True)
    path = _SHAPES_DIR / f"{shape.name}-{shape.seq_len}-{shape.kv_heads}.json"
    if not path.exists():
        write_json_atomic(path, shape.to_dict())
    return path


def layout_text(layout: dict) -> str:
    """A run's layout as ``--layout`` text (``stage_blocks`` as 5/6/6/5)."""
    parts = []
    for k, v in layout.items():
        if v is None:
            continue
        parts.append(f"{k}={'/'.join(map(str, v)) if isinstance(v, list) else v}")
    return ",".join(parts)


def estimate_kwargs(run: PublishedRun) -> dict:
    """The arguments of :func:`autoplan.plan.api.estimate` (= ``autoplan estimate``) for the run."""
    return dict(model=str(shape_file(run.model)), cluster=run.cluster, global_batch=run.global_batch,
                layout=layout_text(run.layout), precision=run.precision, framework=run.framework,
                optimizer=run.optimizer)


def estimate_argv(run: PublishedRun) -> list[str]:
    """The command line that costs the run: ``autoplan estimate ... --json``."""
    kw = estimate_kwargs(run)
    return ["estimate", "--model", kw["model"], "--cluster", kw["cluster"], "--global-batch", str(kw["global_batch"]),
            "--layout", kw["layout"], "--precision", kw["precision"], "--framework", kw["framework"],
            "--optimizer", kw["optimizer"], "--json"]


def estimate_run(run: PublishedRun) -> tuple[Layout, Prediction]:
    return estimate(**estimate_kwargs(run))


def local_batch(run: PublishedRun) -> int:
    """Sequences per data-parallel rank per step."""
    return run.global_batch // run.layout["dp"]


def micro_batch_choices(run: PublishedRun) -> list[int]:
    """The micro-batch sizes a run with an unpublished one may have used: the divisors of its local batch."""
    local = local_batch(run)
    return [d for d in range(1, local + 1) if local % d == 0]


def with_tuned_mbs(run: PublishedRun) -> tuple[PublishedRun, str]:
    """The run with an unpublished micro-batch size (``mbs=None``) filled in, and a note saying so.

    A benchmark run is tuned for throughput, so the micro-batch size its authors did not state is
    taken to be the one they would have found fastest: among the divisors of the local batch, the
    one the cost model predicts fastest with the published degrees fixed, among those that fit in
    memory.  The published step time plays no part in the choice.  Runs that state it pass through."""
    if run.layout["mbs"] is not None:
        return run, ""
    best: tuple[float, int] | None = None
    for mbs in micro_batch_choices(run):
        _, pred = estimate_run(replace(run, layout={**run.layout, "mbs": mbs}))
        if pred.fits and (best is None or pred.step_time_s < best[0]):
            best = (pred.step_time_s, mbs)
    mbs = best[1] if best else 1
    return replace(run, layout={**run.layout, "mbs": mbs}), f"mbs {mbs} (not published: fastest that fits)"


def expressible(run: PublishedRun) -> Layout:
    """The run's layout as ``estimate`` takes it (AutoplanError if refused)."""
    run, _ = with_tuned_mbs(run)
    return estimate_run(run)[0]


@dataclass
class Result:
    run: PublishedRun
    predicted_s: float = math.nan
    fits: bool = False
    peak_gib: float = math.nan
    free_s: float = math.nan
    free_layout: str = ""
    error: str = ""
    note: str = ""
    """what was taken for a field the source does not state (:func:`with_tuned_mbs`)"""
    compute_s: float = 0.0
    """the part of predicted_s proportional to kernel time (compute, recompute, their bubble share)"""

    @property
    def rel_err(self) -> float:
        return (self.predicted_s - self.run.step_time_s) / self.run.step_time_s

    def predicted_at(self, fraction: float, speedup: float | None = None) -> float:
        """The prediction with the chip's sustained fraction changed from the shipped one to
        ``fraction`` and, given ``speedup``, the software release's speed-up from the shipped one
        (``SoftwareStack.release_speedup``) to it: kernel-proportional terms rescaled, communication
        unchanged."""
        s0 = shipped_speedup(self.run)
        s = s0 if speedup is None or s0 == 1.0 else speedup    # only a release that has one
        return self.predicted_s + self.compute_s * (shipped_fraction(self.run) * s0 / (fraction * s) - 1)


    def fraction_for(self, ratio: float) -> float:
        """The sustained fraction at which the prediction is ``ratio`` x the published step time (the
        inverse of :meth:`predicted_at`; inf where the terms that do not scale with it exceed that)."""
        rest = ratio * self.run.step_time_s - (self.predicted_s - self.compute_s)
        return self.compute_s * shipped_fraction(self.run) / rest if rest > 0 else math.inf

    @property
    def implied_fraction(self) -> float:
        """The sustained fraction at which this run's prediction equals its published step time."""
        return self.fraction_for(1.0)


def shipped_fraction(run: PublishedRun) -> float:
    return KERNELS.sustained_fraction.get(run.hardware, 1.0)


def shipped_speedup(run: PublishedRun) -> float:
    """The release speed-up the run's software stack ships with (1.0 for all but megatron@2025)."""
    return _stack_speedup(run.framework)


@functools.lru_cache(maxsize=None)
def _stack_speedup(spec: str) -> float:
    """Per framework spec, looked up once: the fits call :meth:`Result.predicted_at` millions of times."""
    return framework_named(spec).stack.release_speedup


# --------------------------------------------------------------------------------------------
# the second constant taken from published runs: a newer release's speed-up on identical layouts
# --------------------------------------------------------------------------------------------

OLD_RELEASE, NEW_RELEASE = "megatron@2024", "megatron"


def same_setup(a: PublishedRun, b: PublishedRun) -> bool:
    """The same model, GPUs, layout, global batch, precision and optimizer (the software may differ)."""
    return (a.model, a.cluster, a.layout, a.global_batch, a.precision, a.optimizer) == (
        b.model, b.cluster, b.layout, b.global_batch, b.precision, b.optimizer)


def release_pairs(results: list["Result"]) -> list[tuple["Result", "Result"]]:
    """(old, new): every pair of runs of the same setup, one by ``OLD_RELEASE``, one by ``NEW_RELEASE``."""
    old = [r for r in results if r.run.framework == OLD_RELEASE]
    new = [r for r in results if r.run.framework == NEW_RELEASE]
    return [(o, n) for o in old for n in new if same_setup(o.run, n.run)]


def derived_release_speedup(results: list["Result"]) -> float:
    """``NEW_RELEASE``'s speed-up over ``OLD_RELEASE`` as the published runs show it: the geometric mean
    over :func:`release_pairs` of old / new published step time, over the same ratio of the predictions
    made without a speed-up (1.0 where no pair is left)."""
    pairs = release_pairs(results)
    if not pairs:
        return 1.0
    logs = [math.log((o.run.step_time_s / n.run.step_time_s)
                     / (o.predicted_at(shipped_fraction(o.run), 1.0) / n.predicted_at(shipped_fraction(n.run), 1.0)))
            for o, n in pairs]
    return math.exp(statistics.fmean(logs))


def _kernel_share(breakdown: dict[str, float]) -> float:
    """Kernel-proportional seconds of a breakdown: compute, recompute and their share of the bubble."""
    work = breakdown.get("compute", 0.0) + breakdown.get("recompute", 0.0)
    tau = work + breakdown.get("tp_comm", 0.0) + breakdown.get("pp_p2p", 0.0)
    return work + (breakdown.get("bubble", 0.0) * work / tau if tau > 0 else 0.0)


def cost_run(run: PublishedRun, free: bool) -> Result:
    res = Result(run)
    try:
        res.run, res.note = with_tuned_mbs(run)
        lay, pred = estimate_run(res.run)
    except AutoplanError as e:
        res.error = f"not expressible: {e}"
        return res
    res.predicted_s, res.fits, res.peak_gib = pred.step_time_s, pred.fits, pred.peak_memory_bytes / 2 ** 30
    res.compute_s = _kernel_share(pred.breakdown_s)
    if free:
        # the same problem (make_problem, as solve builds it, the published micro-batch size timed
        # exactly as estimate times it), the published degrees not imposed
        kw = estimate_kwargs(res.run)
        opts = SearchOptions(max_vp=max(4, lay.vp), top_k=1,
                             per_layer_recompute=any(k.startswith("recompute_") for k in res.run.layout))
        try:
            pb = make_problem(kw["model"], kw["cluster"], kw["global_batch"], precision=kw["precision"],
                              optimizer=kw["optimizer"], framework=kw["framework"],
                              micro_batch_sizes=fixed_micro_batch(res.run.layout))
            best = search(pb.profile, pb.cluster, pb.train, opts).best[0]
            res.free_s, res.free_layout = best.predicted.step_time_s, best.layout.short()
        except AutoplanError as e:
            res.free_layout = f"none: {e}"
    return res


def fit_fraction(results: list[Result], speedup: float | None = None) -> float:
    """The sustained fraction (one chip) minimising the mean squared log error over ``results`` (the
    newer release's speed-up at ``speedup``, default the shipped one)."""
    def loss(f: float) -> float:
        return sum(math.log(r.predicted_at(f, speedup) / r.run.step_time_s) ** 2 for r in results)
    lo, hi = 0.2, 1.5
    g = (math.sqrt(5) - 1) / 2
    for _ in range(80):   # golden-section search (the loss is unimodal in f)
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if loss(a) < loss(b) else (a, hi)
    return (lo + hi) / 2


def _errors(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    e = [abs(p / t - 1) for p, t in pairs]
    return (statistics.fmean(e), max(e)) if e else (math.nan, math.nan)


def holdout_report(ok: list[Result]) -> list[str]:
    """The generalisation figures of the one fitted constant (the sustained fraction per chip)."""
    lines = []
    source = lambda r: r.run.source.split("]")[0] + "]"  # noqa: E731
    a100 = [r for r in ok if r.run.hardware == "A100"]
    h100 = [r for r in ok if r.run.hardware == "H100"]
    if a100 and h100:   # why the constant is per chip: one value for both does not carry over
        for fit_on, judge in (("A100", "H100"), ("H100", "A100")):
            f = fit_fraction(a100 if fit_on == "A100" else h100)
            m, x = _errors([(r.predicted_at(f), r.run.step_time_s) for r in (h100 if judge == "H100" else a100)])
            lines.append(f"  one fraction for both chips, fitted on the {fit_on} runs ({f:.3f}), judged on the "
                         f"{judge} runs: mean |error| {m * 100:.1f}%, max {x * 100:.1f}%")
    for hw in ("A100", "H100", "H200"):
        sub = [r for r in ok if r.run.hardware == hw]
        if len(sub) < 2:
            continue
        f_all = fit_fraction(sub)
        loo = [(r.predicted_at(fit_fraction([x for x in sub if x is not r])), r.run.step_time_s) for r in sub]
        lines.append(f"  {hw}: fraction fitted on all {len(sub)} {hw} runs = {f_all:.3f} (shipped "
                     f"{KERNELS.sustained_fraction.get(hw, 1.0):.3f}); leave-one-out mean |error| "
                     f"{_errors(loo)[0] * 100:.1f}%, max {_errors(loo)[1] * 100:.1f}%")
        for src in sorted({source(r) for r in sub}):
            inside = [r for r in sub if source(r) == src]
            others = [r for r in sub if source(r) != src]
            if not others:
                continue
            f = fit_fraction(others)
            m, x = _errors([(r.predicted_at(f), r.run.step_time_s) for r in inside])
            lines.append(f"    fitted without {src} ({len(others)} runs): {f:.3f}; on {src}'s {len(inside)} runs "
                         f"mean |error| {m * 100:.1f}%, max {x * 100:.1f}%")
    return lines


def release_speedup_report(ok: list[Result]) -> list[str]:
    """The second constant: how it is derived, from which pairs, and its leave-one-source-out error."""
    pairs = release_pairs(ok)
    new_runs = [r for r in ok if shipped_speedup(r.run) != 1.0]
    shipped = shipped_speedup(new_runs[0].run) if new_runs else 1.0
    lines = [f"release speed-up of {NEW_RELEASE} over {OLD_RELEASE} (SoftwareStack.release_speedup): derived "
             f"{derived_release_speedup(ok):.3f} from {len(pairs)} pairs of the same setup (shipped {shipped:.3f}):"]
    for o, n in pairs:
        lines.append(f"    {o.run.name} {o.run.step_time_s:.2f} s -> {n.run.name} {n.run.step_time_s:.2f} s "
                     f"(published {o.run.step_time_s / n.run.step_time_s:.3f}x)")
    for src in sorted({r.run.source_key for r in new_runs}):
        rest = [r for r in ok if r.run.source_key != src]
        sp = derived_release_speedup(rest)
        inside = [r for r in new_runs if r.run.source_key == src]
        m, x = _errors([(r.predicted_at(shipped_fraction(r.run), sp), r.run.step_time_s) for r in inside])
        lines.append(f"  without {src}: {sp:.3f} ({len(release_pairs(rest))} pairs); on {src}'s {len(inside)} "
                     f"{NEW_RELEASE} runs mean |error| {m * 100:.1f}%, max {x * 100:.1f}% (the fraction as shipped)")
    return lines


def implied_fraction_report(ok: list[Result], max_error: float = 0.2) -> list[str]:
    """Per chip: the sustained fraction each source's runs imply (min-max by source and precision) and
    the band of one fraction that would keep every run of the chip within ``max_error``: what no
    single constant per chip can do where the band is empty or narrow."""
    lines = []
    for hw in ("A100", "H100"):
        sub = [r for r in ok if r.run.hardware == hw and r.compute_s > 0]
        if not sub:
            continue
        needs = max(sub, key=lambda r: r.fraction_for(1 + max_error))
        allows = min(sub, key=lambda r: r.fraction_for(1 - max_error))
        lo, hi = needs.fraction_for(1 + max_error), allows.fraction_for(1 - max_error)
        low_run = min(sub, key=lambda r: r.implied_fraction)
        high_run = max(sub, key=lambda r: r.implied_fraction)
        band = (f"[{lo:.3f}, {hi:.3f}]" if lo <= hi else
                f"none ({needs.run.name} needs >= {lo:.3f}, {allows.run.name} <= {hi:.3f})")
        lines.append(f"  {hw}: implied {low_run.implied_fraction:.3f} ({low_run.run.name}) to "
                     f"{high_run.implied_fraction:.3f} ({high_run.run.name}), shipped "
                     f"{KERNELS.sustained_fraction.get(hw, 1.0):.3f}; one fraction keeping every {hw} run within "
                     f"{max_error * 100:.0f}%: {band}")
        groups: dict[tuple[str, str, str], list[float]] = {}
        for r in sub:
            precision = "fp8" if r.run.precision.startswith("fp8") else r.run.precision
            groups.setdefault((r.run.source_key, r.run.framework, precision), []).append(r.implied_fraction)
        for (src, fw, precision), fr in sorted(groups.items()):
            lines.append(f"    {src:<10} {fw:<25} {precision:<5} {len(fr):>2} runs: {min(fr):.3f}-{max(fr):.3f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-free", action="store_true", help="skip the free solve beside each run")
    ap.add_argument("--only", default="", help="run only the runs whose name contains this")
    args = ap.parse_args(argv)
    runs = [r for r in published_runs() if args.only in r.name]
    print(f"{'run':<28} {'hw':<4} {'GPUs':>5}  {'layout':<44} {'published':>9} {'predicted':>9} {'error':>7} "
          f"{'fits':>4} {'free':>9}  free layout")
    results = []
    for run in runs:
        t0 = time.perf_counter()
        res = cost_run(run, free=not args.no_free)
        results.append(res)
        lay = res.run.layout
        mbs = f"mbs{lay['mbs']}" + ("*" if res.note else "") if lay["mbs"] is not None else "mbs?"
        desc = (f"tp{lay['tp']} pp{lay['pp']} dp{lay['dp']}" + (f" cp{lay['cp']}" if lay.get("cp", 1) > 1 else "")
                + (f" vp{lay['vp']}" if lay.get("vp", 1) > 1 else "")
                + f" {mbs} {lay['recompute']}" + (" sp" if lay.get("sp") else "")
                + (f" zero{lay['zero']}" if lay.get("zero") else ""))
        if res.error:
            print(f"{run.name:<28} {run.hardware:<4} {run.gpus:>5}  {desc:<44} {run.step_time_s:>8.2f}s  {res.error}")
            continue
        free = f"{res.free_s:>8.2f}s" if not math.isnan(res.free_s) else f"{'-':>9}"
        print(f"{run.name:<28} {run.hardware:<4} {run.gpus:>5}  {desc:<44} {run.step_time_s:>8.2f}s "
              f"{res.predicted_s:>8.2f}s {res.rel_err * 100:>+6.1f}% {'yes' if res.fits else 'NO':>4} {free}  "
              f"{res.free_layout}  ({time.perf_counter() - t0:.1f} s)", flush=True)
    ok = [r for r in results if not r.error]
    if any(r.note for r in ok):
        print("* micro-batch size not published: the fastest that fits with the published degrees "
              "(with_tuned_mbs; the published time plays no part)")
    if not ok:
        return 1
    errs = [abs(r.rel_err) for r in ok]
    print(f"\n{len(results)} runs, {len(ok)} expressible; mean |error| {statistics.fmean(errs) * 100:.1f}%, "
          f"max {max(errs) * 100:.1f}% ({max(ok, key=lambda r: abs(r.rel_err)).run.name}); "
          f"fit in memory: {sum(r.fits for r in ok)}/{len(ok)}")
    for hw in ("A100", "H100", "H200"):
        sub = [r for r in ok if r.run.hardware == hw]
        if sub:
            print(f"  {hw}: {len(sub)} runs, mean |error| {statistics.fmean(abs(r.rel_err) for r in sub) * 100:.1f}%, "
                  f"max {max(abs(r.rel_err) for r in sub) * 100:.1f}%")
    if not args.no_free:
        fitting = [r for r in ok if r.fits]      # where the published layout does not fit, nothing compares
        slower = [r for r in fitting if not math.isnan(r.free_s) and r.free_s > r.predicted_s * (1 + 1e-9)]
        missing = [r for r in fitting if math.isnan(r.free_s)]
        print(f"free solve no slower than the published layout (of the {len(fitting)} predicted to fit): "
              f"{len(fitting) - len(slower) - len(missing)}/{len(fitting)}"
              + (f"; slower: {', '.join(r.run.name for r in slower)}" if slower else "")
              + (f"; no free solution: {', '.join(r.run.name for r in missing)}" if missing else ""))
    # generalisation of the one constant fitted to published runs
    loo = []
    for r in ok:
        same = [x for x in ok if x.run.hardware == r.run.hardware and x is not r]
        loo.append((r.predicted_at(fit_fraction(same)) if same else r.predicted_s, r.run.step_time_s))
    m, x = _errors(loo)
    loso = []
    held_out: dict[tuple[str, str], tuple[float, float]] = {}     # (source, chip) -> (fraction, speed-up)
    for r in ok:
        key = (r.run.source_key, r.run.hardware)
        if key not in held_out:      # both constants from the other sources' runs, once per source and chip
            rest = [x for x in ok if x.run.source_key != r.run.source_key]
            speedup = derived_release_speedup(rest)
            others = [x for x in rest if x.run.hardware == r.run.hardware]
            held_out[key] = (fit_fraction(others, speedup) if others else shipped_fraction(r.run), speedup)
        fraction, speedup = held_out[key]
        loso.append((r.predicted_at(fraction, speedup), r.run.step_time_s))
    lm, lx = _errors(loso)
    print(f"\nIN-SAMPLE (the shipped constants: the fraction fitted on the 2021-24 runs, the release speed-up): "
          f"mean |error| {statistics.fmean(errs) * 100:.1f}%, max {max(errs) * 100:.1f}%")
    print(f"LEAVE-ONE-SOURCE-OUT (each run predicted with both constants taken from the other sources' runs: the "
          f"fraction of its chip, the speed-up): mean |error| {lm * 100:.1f}%, max {lx * 100:.1f}%")
    for line in release_speedup_report(ok):
        print(line)
    print(f"\nhold-out of the first constant, the sustained fraction per chip (assumptions.KernelAssumptions; the "
          f"release speed-up as shipped):\n  leave-one-out (each run predicted with the fraction fitted on the other "
          f"runs of its chip): mean |error| {m * 100:.1f}%, max {x * 100:.1f}%")
    for line in holdout_report(ok):
        print(line)
    print("\nimplied sustained fraction (at which a run's prediction equals its published step time), by source, "
          "framework and precision:")
    for line in implied_fraction_report(ok):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
