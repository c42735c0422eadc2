"""What is trained, apart from the layout: batch, precision, optimizer and the software stack
whose costs an analytic profile assumes."""

from __future__ import annotations

from dataclasses import dataclass

from autoplan.errors import InputError
from autoplan.profile.assumptions import SoftwareStack
from autoplan.profile.formats import BYTES_PER_ELEMENT, is_fp8

FP8_WEIGHT_COPY_BYTES = 2
"""fp8 training's extra bytes per parameter of a layer while it runs: the fp8 copy of its weights and
the transpose (Hopper's fp8 GEMMs take both operands K-major, so the weight-gradient GEMM needs the
transposed copy); made per layer (torchao casts in each forward; Transformer Engine's cache is
counted the same way: only the layer at hand's)"""


@dataclass(frozen=True)
class TrainingConfig:
    """What is being trained, apart from the layout."""

    global_batch: int
    """samples (sequences) per optimizer step"""
    precision: str = "fp32"
    """fp32, or bf16/fp16 mixed precision (16-bit compute; see :meth:`state_bytes_per_param`), or fp8:
    bf16 mixed precision whose linear layers' GEMMs run in fp8 (attention, norms, loss in 16 bits)"""
    optimizer: str = "adamw"
    """adamw (two fp32 moments), adamw-bf16 (16-bit moments and master remainder) or sgd (no state)"""
    stack: SoftwareStack | None = None
    """the training software whose overlap and kernels an analytic profile assumes
    (``profile/assumptions.py``); None: the analytic profile's own stack (its environment), and for
    a measured profile the fully exposed model below (DP, TP and pipeline traffic not overlapped)"""
    framework: str = "autoplan"
    """the framework that will run the plan (:mod:`autoplan.plan.frameworks`): its rules decide which
    layouts are allowed; its software stack is ``stack`` for analytic profiles"""

    def __post_init__(self) -> None:
        from autoplan.plan.plan import MAX_DEGREE
        if not isinstance(self.global_batch, int) or isinstance(self.global_batch, bool) \
                or not 1 <= self.global_batch <= MAX_DEGREE:
            raise InputError(f"global batch must be an integer from 1 to {MAX_DEGREE}, got {self.global_batch}")
        if self.precision not in BYTES_PER_ELEMENT:
            raise InputError(f"precision must be one of {'|'.join(BYTES_PER_ELEMENT)}, got {self.precision!r}")
        from autoplan.plan.plan import OPTIMIZERS
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {'|'.join(OPTIMIZERS)}, got {self.optimizer!r}")

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
