"""The software that will run a plan (``--framework``): its costs and its rules.

A plan is only as good as the costs of the software that runs it.  ``solve`` and ``estimate`` take
``--framework NAME[@RELEASE]``; each framework brings

- its **costs**: a software stack of :mod:`autoplan.profile.assumptions` (attention kernel,
  fused kernels, vocabulary-parallel embedding and head, which communication it overlaps, how it
  exchanges keys and values under context parallel, how its pipeline holds receive buffers), used
  to derive the analytic profile and by the cost model;
- its **rules**: which layouts it can run at all (:func:`framework_violation`): ZeRO levels,
  pipeline schedules, ZeRO with pipelines, context parallel, fp8.

The plan records the framework (``training.framework``); ``run`` and ``validate`` run only
``autoplan`` plans (they run autoplan's executor), and ``export --to X`` warns or refuses when the
plan was made for another framework.

Releases (``megatron@2021`` ...) name the software of published runs, so that
``benchmarks/published_runs.py`` costs each one exactly as ``autoplan estimate --framework`` does::

    python -c "from autoplan.plan.frameworks import FRAMEWORKS; print(sorted(FRAMEWORKS))"
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autoplan.errors import InputError
from autoplan.profile.assumptions import STACKS, SoftwareStack
from autoplan.profile.formats import is_fp8

FP8_CHIPS = ("H100", "H200")
"""chips with fp8 tensor cores among the catalogue's (H100/H200 datasheets: 1,979 dense fp8 TFLOP/s)"""


@dataclass(frozen=True)
class Framework:
    """One release of a training framework: its software stack and the layouts it can run."""

    name: str
    release: str
    stack: SoftwareStack
    zero_levels: tuple[int, ...]
    """ZeRO levels it has (0: plain data parallel; 1-2: sharded optimizer state (and gradients),
    e.g. Megatron's distributed optimizer; 3: sharded weights, FSDP)"""
    schedules: tuple[str, ...]
    """pipeline schedules it runs"""
    pipeline_zero_levels: tuple[int, ...]
    """ZeRO levels it combines with pipeline parallelism"""
    context_parallel: bool
    fp8: bool
    """fp8 GEMMs on chips that have them (Transformer Engine, torchao float8)"""
    fp8_with_tp: bool = True
    """fp8 combined with tensor parallel"""
    fp8_rowwise: bool = False
    """fp8 with one scale per row (``--precision fp8-rowwise``: torchao's rowwise recipe)"""
    tensor_parallel: bool = True
    pipeline_parallel: bool = True
    interleaved_needs_pp_multiple: bool = False
    """the interleaved schedule needs the micro-batch count to be a multiple of pp"""
    optimizers: tuple[str, ...] = ("adamw", "sgd")
    """optimizers it runs (``training.OPTIMIZERS``)"""
    source: str = ""

    @property
    def spec(self) -> str:
        return self.name if self.release == DEFAULT_RELEASE[self.name] else f"{self.name}@{self.release}"


def _megatron(release: str, stack: str, zero: tuple[int, ...], cp: bool, fp8: bool, source: str,
              optimizers: tuple[str, ...] = ("adamw", "sgd")) -> Framework:
    return Framework("megatron", release, STACKS[stack], zero_levels=zero, schedules=("1f1b", "interleaved"),
                     pipeline_zero_levels=(0, 1), context_parallel=cp, fp8=fp8,
                     interleaved_needs_pp_multiple=True, optimizers=optimizers, source=source)


_ALL = [
    Framework("autoplan", "0.1", STACKS["autoplan"], zero_levels=(0, 1, 2, 3),
              schedules=("gpipe", "1f1b", "interleaved"), pipeline_zero_levels=(0, 1, 2, 3),
              context_parallel=True, fp8=True, fp8_with_tp=False, fp8_rowwise=True,
              source="autoplan's executor (execute/): DDP or FSDP2, DTensor TP, torch.distributed.pipelining, "
                     "context parallel by an all-gather of keys and values, fp8 through torchao on CUDA"),
    _megatron("2025", "megatron-core-2025", (0, 1, 2, 3), True, True,
              "Megatron-Core as NeMo 2 / Megatron-Bridge run it: distributed optimizer (zero 1-2) or Megatron "
              "FSDP (zero 3, not with pipelines), 1F1B and interleaved 1F1B, context parallel, Transformer "
              "Engine fp8"),
    _megatron("2024", "megatron-core-2024", (0, 1), True, True,
              "Megatron-Core r0.8 (2024) as NeMo 1 runs it: distributed optimizer (or Apex's distributed_fused_adam, "
              "whose state may be 16-bit: --optimizer adamw-bf16), 1F1B / interleaved, context parallel, TE fp8",
              optimizers=("adamw", "adamw-bf16", "sgd")),
    _megatron("2022", "megatron-lm-2022", (0, 1), False, False,
              "Megatron-LM 2022 (sequence parallel, selective recompute; no context parallel, no fp8)"),
    _megatron("2021", "megatron-lm-2021", (0,), False, False, "Megatron-LM 2021 (SC'21), --DDP-impl local"),
    _megatron("2021-torch-ddp", "megatron-lm-2021-torch-ddp", (0,), False, False,
              "Megatron-LM 2021 (SC'21), --DDP-impl torch"),
    Framework("torchtitan", "2024", STACKS["torchtitan"], zero_levels=(0, 2, 3),
              schedules=("gpipe", "1f1b", "interleaved"), pipeline_zero_levels=(0, 2, 3),
              context_parallel=True, fp8=True, fp8_rowwise=True,
              source="torchtitan (2024-25): DDP or FSDP2 (reshard_after_forward False = zero 2, True = zero 3), "
                     "torch.distributed.pipelining schedules, torch context_parallel, torchao float8"),
    Framework("deepspeed", "megatron-deepspeed", STACKS["deepspeed-megatron"], zero_levels=(0, 1, 2, 3),
              schedules=("1f1b",), pipeline_zero_levels=(0, 1), context_parallel=False, fp8=False,
              source="DeepSpeed with Megatron-DeepSpeed's model: ZeRO 1-3; its pipeline engine runs one 1F1B "
                     "schedule and only with ZeRO 0-1; no ring context parallel (Ulysses splits heads, not "
                     "modelled), no fp8"),
    Framework("composer", "2023", STACKS["composer-fsdp"], zero_levels=(0, 2, 3), schedules=(),
              pipeline_zero_levels=(), context_parallel=False, fp8=False, tensor_parallel=False,
              pipeline_parallel=False,
              source="MosaicML Composer / llm-foundry: torch FSDP (SHARD_GRAD_OP = zero 2, FULL_SHARD = zero 3)"),
]
_ALL.append(replace(next(f for f in _ALL if f.name == "torchtitan"), release="2024-async-tp",
                    stack=STACKS["torchtitan-async-tp"], source="torchtitan with async tensor parallel"))
FRAMEWORKS: dict[str, Framework] = {f"{f.name}@{f.release}": f for f in _ALL}
DEFAULT_RELEASE = {"autoplan": "0.1", "megatron": "2025", "torchtitan": "2024", "deepspeed": "megatron-deepspeed",
                   "composer": "2023"}
FRAMEWORK_NAMES = tuple(DEFAULT_RELEASE)
DEFAULT_FRAMEWORK = "autoplan"


def framework(spec: str) -> Framework:
    """``NAME`` (its current release) or ``NAME@RELEASE``; InputError naming the known ones."""
    name, _, release = (spec or DEFAULT_FRAMEWORK).strip().partition("@")
    if name not in DEFAULT_RELEASE:
        raise InputError(f"--framework: unknown framework {name!r} (known: {'|'.join(FRAMEWORK_NAMES)})")
    key = f"{name}@{release or DEFAULT_RELEASE[name]}"
    if key not in FRAMEWORKS:
        known = ", ".join(k for k in FRAMEWORKS if k.startswith(name + "@"))
        raise InputError(f"--framework: {name} has no release {release!r} (known: {known})")
    return FRAMEWORKS[key]


def framework_family(spec: str) -> str:
    """The framework's name without its release (``megatron@2021`` -> ``megatron``)."""
    return (spec or DEFAULT_FRAMEWORK).partition("@")[0]


def framework_violation(fw: Framework, layout, precision: str = "bf16", chip: str = "",
                        optimizer: str = "adamw") -> str | None:
    """Why ``fw`` cannot run ``layout`` (a :class:`~autoplan.plan.plan.Layout` or a dict of its
    fields) with ``precision`` and ``optimizer``, or None.  ``chip``: the accelerator family (fp8
    needs one of :data:`FP8_CHIPS`)."""
    get = layout.get if isinstance(layout, dict) else (lambda k, d=None: getattr(layout, k, d))
    tp, pp, cp, zero = get("tp", 1), get("pp", 1), get("cp", 1), get("zero", 0)
    name = fw.spec
    if optimizer not in fw.optimizers:
        return f"--framework {name} has no optimizer {optimizer} (it has {', '.join(fw.optimizers)})"
    fp8 = is_fp8(precision)
    if fp8 and not fw.fp8:
        return f"--framework {name} does not train in fp8"
    if precision == "fp8-rowwise" and not fw.fp8_rowwise:
        return f"--framework {name} has no rowwise-scaled fp8 (--precision fp8 scales per tensor)"
    if fp8 and chip and chip not in FP8_CHIPS:
        return f"fp8 needs a GPU with fp8 tensor cores ({', '.join(FP8_CHIPS)}); this cluster's is {chip}"
    if fp8 and tp > 1 and not fw.fp8_with_tp:
        return f"--framework {name} trains fp8 without tensor parallel (tp={tp}): use tp=1 or another framework"
    if tp > 1 and not fw.tensor_parallel:
        return f"--framework {name} has no tensor parallel (tp={tp})"
    if cp > 1 and not fw.context_parallel:
        return f"--framework {name} has no context parallel (cp={cp})"
    if pp > 1 and not fw.pipeline_parallel:
        return f"--framework {name} has no pipeline parallel (pp={pp})"
    if zero not in fw.zero_levels:
        return f"--framework {name} has no zero={zero} (it has {', '.join(map(str, fw.zero_levels))})"
    if pp > 1:
        schedule = get("schedule", "1f1b")
        if schedule not in fw.schedules:
            return f"--framework {name} does not run the {schedule} schedule (it runs {', '.join(fw.schedules)})"
        if zero not in fw.pipeline_zero_levels:
            return (f"--framework {name} does not combine zero={zero} with pipeline parallel "
                    f"(only zero {', '.join(map(str, fw.pipeline_zero_levels))})")
        m = get("num_microbatches", None)
        if schedule == "interleaved" and fw.interleaved_needs_pp_multiple and m is not None and m % pp:
            return (f"--framework {name}: the interleaved schedule needs a micro-batch count that is a multiple "
                    f"of pp={pp} (got {m})")
    return None
