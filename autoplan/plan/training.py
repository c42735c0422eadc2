"""What is trained, apart from the model and the layout: batch, precision, optimizer, the framework
and the software stack whose costs an analytic profile assumes (:class:`TrainingConfig`).

The one description of it: a :class:`~autoplan.plan.api.Problem` holds a TrainingConfig with the
model's and the cluster's profiles; a plan file records its fields, flat, beside the model and the
cluster (:class:`~autoplan.plan.plan.TrainingSpec`, whose :attr:`~autoplan.plan.plan.TrainingSpec.config`
reads them back); :meth:`Problem.training_spec` and :meth:`Problem.from_plan` convert one way and the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from autoplan.errors import InputError
from autoplan.jsonio import short_repr
from autoplan.profile.assumptions import SoftwareStack
from autoplan.profile.formats import BYTES_PER_ELEMENT, MAX_BATCH, PRECISIONS, Precision, is_fp8

Optimizer = Literal["adamw", "adamw-bf16", "sgd"]
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
"""adamw: fp32 master weights and moments; adamw-bf16: AdamW whose moments and master-weight remainder
are 16-bit (NeMo 1's distributed_fused_adam with ``dtype: bf16``: 6 bytes of state per parameter
instead of 12; run by megatron@2024 only); sgd: no state"""

FP8_WEIGHT_COPY_BYTES = 2
"""fp8 training's extra bytes per parameter of a layer while it runs: the fp8 copy of its weights and
the transpose (Hopper's fp8 GEMMs take both operands K-major, so the weight-gradient GEMM needs the
transposed copy); made per layer (torchao casts in each forward; Transformer Engine's cache is
counted the same way: only the layer at hand's)"""


def choice_violation(*, precision: str, optimizer: str) -> str | None:
    """Why ``precision`` or ``optimizer`` is not one autoplan trains with (:data:`PRECISIONS`,
    :data:`OPTIMIZERS`); None when both are."""
    if precision not in PRECISIONS:
        return f"precision must be one of {'|'.join(PRECISIONS)}, got {short_repr(precision)}"
    if optimizer not in OPTIMIZERS:
        return f"optimizer must be one of {'|'.join(OPTIMIZERS)}, got {short_repr(optimizer)}"
    return None


@dataclass(frozen=True)
class TrainingConfig:
    """What is being trained, apart from the layout."""

    global_batch: int
    """samples (sequences) per optimizer step"""
    precision: Precision = "fp32"
    """fp32, or bf16/fp16 mixed precision (16-bit compute; see :meth:`state_bytes_per_param`), or fp8:
    bf16 mixed precision whose linear layers' GEMMs run in fp8 (attention, norms, loss in 16 bits)"""
    optimizer: Optimizer = "adamw"
    """adamw (two fp32 moments), adamw-bf16 (16-bit moments and master remainder) or sgd (no state)"""
    stack: SoftwareStack | None = None
    """the training software whose overlap and kernels an analytic profile assumes
    (``profile/assumptions.py``); None: the analytic profile's own stack (its environment), and for
    a measured profile the fully exposed model below (DP, TP and pipeline traffic not overlapped)"""
    framework: str = "autoplan"
    """the framework that will run the plan (:mod:`autoplan.plan.frameworks`): its rules decide which
    layouts are allowed; its software stack is ``stack`` for analytic profiles"""

    def __post_init__(self) -> None:
        if not isinstance(self.global_batch, int) or isinstance(self.global_batch, bool) \
                or not 1 <= self.global_batch <= MAX_BATCH:
            raise InputError(f"global batch must be an integer from 1 to {MAX_BATCH}, got {self.global_batch}")
        why = choice_violation(precision=self.precision, optimizer=self.optimizer)
        if why:
            raise InputError(why)

    @property
    def mixed(self) -> bool:
        """bf16/fp16 mixed precision"""
        return self.precision != "fp32"

    def state_bytes_per_param(self, executor: bool = True) -> tuple[int, int, int]:
        """(weight, gradient, optimizer-state) bytes per parameter.

        autoplan's executor (``executor``: measured profiles and the ``autoplan`` software stack)
        holds 4 + 4 + (8 for AdamW's two moments | 0 for SGD) in every precision: in mixed
        precision the parameters ARE the fp32 master weights (autocast, or FSDP2's
        ``MixedPrecisionPolicy`` over fp32 shards) and their gradients are fp32; the 16-bit weights
        are :meth:`compute_weight_bytes_per_param` on top (4 + 4 + 8 + 2 = the 18 bytes per
        parameter of mixed-precision Adam with fp32 gradients, DESIGN.md).
        Other stacks (16-bit weights and gradients, Megatron style): fp32 as above; mixed
        2 + 2 + (12: fp32 master + two moments | 4: fp32 master), the "16 bytes per parameter" rule;
        ``adamw-bf16`` (Apex's DistributedFusedAdam with 16-bit state, ``store_param_remainders``: the
        16-bit weight plus a 16-bit remainder is the fp32 master): 2 + 2 + 6."""
        adam = self.optimizer.startswith("adamw")
        if self.precision == "fp32" or executor:
            return 4, 4, (8 if adam else 0)
        return 2, 2, ((6 if self.optimizer == "adamw-bf16" else 12) if adam else 4)

    def fp8_weight_bytes_per_param(self) -> int:
        """Extra bytes per parameter that fp8 training holds (:data:`FP8_WEIGHT_COPY_BYTES`), else 0."""
        return FP8_WEIGHT_COPY_BYTES if is_fp8(self.precision) else 0

    def compute_weight_bytes_per_param(self) -> int:
        """Bytes per parameter of the weights the layers compute with: the 16-bit copies of mixed
        precision (autocast's cache, FSDP2's gathered ``param_dtype`` parameters, or the 16-bit
        weights themselves), or fp32 weights."""
        return BYTES_PER_ELEMENT[self.precision]
