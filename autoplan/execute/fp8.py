"""fp8 training in autoplan's executor: torchao's float8 linear layers, on GPUs that have fp8 tensor cores.

``precision=fp8`` trains as bf16 mixed precision whose ``nn.Linear`` GEMMs run in fp8 with
dynamic (tensorwise) scaling: torchao's ``convert_to_float8_training`` swaps each linear layer of
a pipeline chunk for a ``Float8Linear`` before data parallel wraps it (torchtitan's order: float8,
then TP, activation checkpointing, compile, FSDP).  Attention, norms, embedding and the loss stay
in bf16, as the cost model assumes (:mod:`autoplan.profile.analytic`).

Each block of an fp8 chunk is compiled (:func:`compile_blocks`): torchao's scaling (an amax
reduction, a scale, a cast and a transposed copy per operand) is written to be fused by
``torch.compile``; eager, each is its own kernel.  Measured on one H200 (2026-12-04, torch 2.11,
torchao 0.17, ``benchmarks/gpu_check.py fp8``), a block's forward + backward against bf16: eager
fp8 0.32x (gpt3-1.3b, mbs 4), 0.36x (gpt3-6.7b, mbs 2), 0.52x (llama3-8b, mbs 1); compiled 1.06x,
1.09x, 1.10x.

Refused in one line (before any collective) where it cannot run: not on CUDA, a GPU without fp8
tensor cores (compute capability below 8.9: Ada and Hopper have them), torchao not installed, or
with tensor parallel (torchao's float8 TP styles are not wired into the executor's TP plan).

This path needs a GPU: the tests here check the refusals on CPU; ``benchmarks/gpu_check.sh`` runs
an fp8 stage on the day a GPU is lent.
"""

from __future__ import annotations

import torch
from torch import nn

from autoplan.errors import LayoutError

FP8_MIN_CAPABILITY = (8, 9)
"""CUDA compute capability with fp8 tensor cores (Ada 8.9, Hopper 9.0, Blackwell 10.x)"""


def fp8_refusal(device: torch.device, tp: int) -> str | None:
    """Why fp8 cannot train on ``device`` with tensor-parallel degree ``tp``, or None."""
    if device.type != "cuda":
        return (f"fp8 training needs a CUDA GPU with fp8 tensor cores (H100, H200); this process trains on "
                f"{device.type}: plan in bf16 instead (--precision bf16)")
    cap = torch.cuda.get_device_capability(device)
    if cap < FP8_MIN_CAPABILITY:
        return (f"fp8 training needs fp8 tensor cores (compute capability >= 8.9); "
                f"{torch.cuda.get_device_name(device)} has {cap[0]}.{cap[1]}")
    if tp > 1:
        return "autoplan's executor trains fp8 without tensor parallel (tp=1): solve again with --layout tp=1"
    try:
        import torchao.float8  # noqa: F401
    except ImportError:
        return "fp8 training uses torchao's float8 linear layers: pip install torchao"
    return None


def check_fp8(device: torch.device, tp: int) -> None:
    why = fp8_refusal(device, tp)
    if why:
        raise LayoutError(why)


def compile_blocks(blocks: nn.ModuleDict) -> None:
    """Compile each block of ``blocks`` in place (``nn.Module.compile``: the module and its parameter
    names stay as they are, so checkpoints and the recompute and data-parallel wrappers see the same
    names).  The blocks of a model share one forward, so one compilation serves them all."""
    for block in blocks.values():
        block.compile()


def convert_to_fp8(module: nn.Module, rowwise: bool = False) -> nn.Module:
    """Swap ``module``'s linear layers for torchao ``Float8Linear`` (dynamic tensorwise scaling, or
    torchao's "rowwise" recipe), in place; linear layers whose sizes are not multiples of 16 (fp8 GEMM
    alignment) stay in bf16."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    config = Float8LinearConfig.from_recipe_name("rowwise") if rowwise else None

    def aligned(mod: nn.Module, fqn: str) -> bool:
        return isinstance(mod, nn.Linear) and mod.in_features % 16 == 0 and mod.out_features % 16 == 0
    return convert_to_float8_training(module, module_filter_fn=aligned, config=config)
