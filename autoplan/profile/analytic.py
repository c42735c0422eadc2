"""An analytic model profile: layer costs from GEMM shapes, bytes moved and the attention kernel.

For hardware one does not have (``autoplan solve --model gpt3-175b --cluster dgx-a100-80gb:128``)
the profile is derived, not measured.  Every constant it uses is in ``assumptions.py`` (kernel
behaviour, software stacks) or ``hardware.py`` (datasheets, one measured large GEMM), with its
source.  Per transformer block on one TP rank of ``t``, a micro-batch of ``b`` sequences of ``s``
tokens (T = b*s; ``h`` hidden, ``a`` heads of ``d``, ``kv`` = kv_heads*d, ``f`` ffn_hidden)::

    GEMMs        forward  QKV [T,h]x[h,(h+2kv)/t]   out [T,h/t]x[h/t,h]
                          MLP [T,h]x[h,g*f/t] (g = 1 GeLU, 2 SwiGLU)   [T,f/t]x[f/t,h]
                 backward each forward GEMM [M,K]x[K,N] becomes dgrad [M,N]x[N,K] and
                          wgrad [K,M]x[M,N]
                 time     max(2MNK / (peak * e * q(M,N)),  2 bytes * (MK + KN + MN) / bandwidth)
                          + launch;   q = useful / issued tile work (tile and wave quantization
                          of 256x128 tiles on the SMs), e = the measured 8192^3 GEMM rate / peak
                          / q(8192, 8192): small TP shards and few tokens run far below peak
    attention    flash    4*b*(a/t)*s^2*d FLOPs (half skipped under the causal mask) at the
                          kernel's published forward fraction of peak; backward 2.5x the forward
                          FLOPs at its (lower) published backward fraction
                 unfused  scores [s,d]x[d,s] and context [s,s]x[s,d] as batched GEMMs, plus the
                          softmax (and dropout) reading and writing every one of b*(a/t)*s^2 scores
    elementwise  norms, residual adds (+dropout): bytes per token of the residual stream, whole on
                 every TP rank unless sequence parallel splits them by t; the MLP activation
                 (GeLU / SwiGLU) on f/t; backward moves twice the forward's bytes
    head         [T,h]x[h,V/t'] (t' = t for a vocab-parallel head, else 1) and the cross-entropy's
                 bytes per logit; embed: a gather (memory-bound) and a dense V/t' x h gradient

Each timing also records what the cost model needs to apply a layout's options: the forward time
selective recomputation repeats (the unfused attention core; nothing for flash attention, which
saves no scores) and the time sequence parallel removes (the residual-stream kernels split by t).

Saved activations per micro-batch (Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models", Table 2; DESIGN.md), in 16-bit units and then scaled by
bytes-per-element / 2 (so fp32 doubles it)::

    block  s*b*(10h + (4h + 4kv + 4f)/t + 5*a*s/t)   q, o input; k, v; MLP inner (2 tensors)

With kv = h and f = 4h that is s*b*h*(10 + 24/t + 5as/(ht)), Megatron TP WITHOUT sequence
parallel (norm inputs, the QKV and MLP inputs and the dropout masks stay whole on every TP rank),
which is also what ``layers.profile_model`` measures; at t = 1 it is DESIGN.md's s*b*h*(34 + 5as/h).
For a software stack the terms follow what it keeps: no dropout drops the two 1-byte masks (2h),
flash attention keeps no scores (the 5as/t term), SwiGLU keeps its gate as well (6f, 8f unfused).
``head`` saves its two inputs (norm, projection) and the fp32 log-softmax of the loss
(2*s*b*h*elem + 4*s*b*V); ``embed`` saves the int64 token ids (8*s*b).

Output bytes (what a pipeline cut sends): s*b*h*elem (head: its logits, s*b*V*elem).
Optimizer step per parameter: memory-bound, ``ADAMW_BYTES_PER_PARAM`` / memory bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from autoplan.errors import InputError
from autoplan.models.shapes import ModelShape, forward_flops_per_sample
from autoplan.models.transformer import tp_degrees_allowed
from autoplan.profile.assumptions import DEFAULT_STACK, KERNELS, KernelAssumptions, SoftwareStack, stack as stack_named
from autoplan.profile.formats import (BYTES_PER_ELEMENT, ClusterProfile, LayerInfo, LayerKindProfile, LayerTiming,
                                      ModelProfile, is_fp8)

TOKEN_ID_BYTES = 8          # int64 token ids
LOSS_SOFTMAX_BYTES = 4      # cross-entropy computes log-softmax in fp32

ADAMW_BYTES_PER_PARAM = {
    # mixed precision: read fp32 master, fp32 grad, m, v (16); write master, m, v (12), 16-bit weight (2)
    "bf16": 30, "fp16": 30,
    # fp8: as bf16, plus casting each updated weight to fp8 and its transpose (read 2, write 2)
    "fp8": 34, "fp8-rowwise": 34,
    # fp32: read weight, grad, m, v (16); write weight, m, v (12)
    "fp32": 28,
}
SGD_BYTES_PER_PARAM = {"bf16": 14, "fp16": 14, "fp32": 12, "fp8": 18, "fp8-rowwise": 18}   # read weight and grad, write weight (+16-bit copy)

FALLBACK_FLOPS_PER_BYTE = 153.0
"""machine balance used when a cluster profile gives no memory bandwidth: the A100's
312e12 FLOP/s / 2.039e12 B/s (NVIDIA A100 datasheet)"""


# --------------------------------------------------------------------------------------------
# FLOPs, parameters, activations (shape facts)
# --------------------------------------------------------------------------------------------


def block_activation_parts(shape: ModelShape, seq_len: int, stack: SoftwareStack | None = None,
                           fp8: bool = False) -> tuple[float, float, float]:
    """Saved activations of one block per token in 16-bit units, split as (whole on every TP rank
    without sequence parallel, split by TP, attention scores split by TP) -- the three terms of the
    module docstring's formula, for ``stack`` (None: Megatron's defaults, dropout and unfused
    attention, which is also what ``layers.profile_model`` measures).  ``fp8``: the four linear layers
    keep their inputs for backward as fp8 (1 byte: Transformer Engine and torchao save the cast
    input), so the QKV and MLP inputs (whole) and the out-projection and fc2 inputs (split) halve."""
    h, kv, f = shape.hidden, shape.kv_heads * shape.head_dim, shape.ffn_hidden
    mlp = 4 * f if shape.mlp == "gelu" else (6 * f if (stack is None or stack.fused_elementwise) else 8 * f)
    whole = 10 * h - (0 if stack is None or stack.dropout else 2 * h) - (2 * h if fp8 else 0)
    scores = 5.0 * shape.heads * seq_len
    if stack is not None and stack.attention != "unfused":
        scores = 0.0
    elif stack is not None and not stack.dropout:
        scores = 2.0 * shape.heads * seq_len          # the softmax output only
    return float(whole), float(4 * h + 4 * kv + mlp - ((h + f) if fp8 else 0)), scores


def saved_activation_bytes(kind: str, shape: ModelShape, seq_len: int, mbs: int, tp: int,
                           bytes_per_element: int, stack: SoftwareStack | None = None, vocab_tp: int = 1,
                           fp8: bool = False) -> int:
    """Bytes saved for backward by one layer on one TP rank, per micro-batch (module docstring).
    ``vocab_tp``: the TP degree splitting a vocab-parallel head's logits."""
    s, b, h = seq_len, mbs, shape.hidden
    if kind == "block":
        whole, split, scores = block_activation_parts(shape, s, stack, fp8=fp8)
        per_token_16bit = whole + split / tp + scores / tp
        return int(s * b * per_token_16bit * bytes_per_element / 2)
    if kind == "head":
        return 2 * s * b * h * bytes_per_element + LOSS_SOFTMAX_BYTES * s * b * shape.vocab // vocab_tp
    if kind == "embed":
        return TOKEN_ID_BYTES * s * b
    raise InputError(f"unknown layer kind {kind!r}")


def param_count(kind: str, shape: ModelShape) -> int:
    """Parameters of one layer of ``kind``, unsharded."""
    if kind == "block":
        return shape.block_param_count()
    if kind == "head":
        return shape.hidden * shape.vocab + shape.hidden
    if kind == "embed":
        return shape.vocab * shape.hidden
    raise InputError(f"unknown layer kind {kind!r}")


def layer_chain(shape: ModelShape) -> tuple[list[LayerInfo], list[tuple[str, str]]]:
    """The pipeline units of the reference transformer in order, and the chain of edges
    ``embed -> block.0 -> ... -> head``."""
    layers = [LayerInfo("embed", "embed")] + [LayerInfo(f"block.{i}", "block") for i in range(shape.layers)] \
        + [LayerInfo("head", "head")]
    return layers, [(a.name, b.name) for a, b in zip(layers, layers[1:])]


# --------------------------------------------------------------------------------------------
# the device: GEMMs, attention, bytes
# --------------------------------------------------------------------------------------------

def _memory_bandwidth(cluster: ClusterProfile) -> float:
    bw = cluster.device.memory_bandwidth_bytes_per_s
    return bw if bw > 0 else cluster.device.compute_flops_per_s / FALLBACK_FLOPS_PER_BYTE


@dataclass(frozen=True)
class DeviceModel:
    """What the analytic model needs of one device.  ``sm_count == 0`` is the flat model: every
    FLOP at ``peak_flops_per_s * gemm_fraction`` whatever the shape (a device not in the catalogue,
    or fp32 on a GPU, whose catalogue figures are 16-bit)."""

    name: str
    family: str
    peak_flops_per_s: float
    gemm_fraction: float
    """achieved / peak of a GEMM with no tile or wave waste"""
    sm_count: int
    memory_bandwidth_bytes_per_s: float

    @classmethod
    def of(cls, cluster: ClusterProfile, precision: str, compute_flops_per_s: float | None = None,
           kernels: KernelAssumptions = KERNELS) -> "DeviceModel":
        from autoplan.profile.hardware import accelerator_of
        acc = accelerator_of(cluster.device.name)
        mem_bw = _memory_bandwidth(cluster)
        if acc is None or not acc.sm_count or precision == "fp32" or compute_flops_per_s is not None:
            rate = compute_flops_per_s if compute_flops_per_s is not None else cluster.device.compute_flops_per_s
            return cls(cluster.device.name, getattr(acc, "family", ""), rate, 1.0, 0, mem_bw)
        q = tile_quantization(8192, 8192, 1, acc.sm_count, kernels)
        frac = cluster.device.compute_flops_per_s / acc.peak_16bit_matmul_flops_per_s / q
        return cls(acc.name, acc.family, acc.peak_16bit_matmul_flops_per_s, frac, acc.sm_count, mem_bw)

    def fp8(self, kernels: KernelAssumptions = KERNELS) -> "DeviceModel":
        """The same device running fp8 GEMMs (its fp8 peak; InputError for a chip without them)."""
        from autoplan.profile.hardware import accelerator_of
        acc = accelerator_of(self.name)
        if acc is None or not acc.peak_fp8_matmul_flops_per_s or not self.sm_count:
            raise InputError(f"fp8 needs a GPU with fp8 tensor cores (H100, H200); {self.name or 'this device'} "
                             f"has none")
        return DeviceModel(self.name, self.family, acc.peak_fp8_matmul_flops_per_s,
                           self.gemm_fraction * kernels.fp8_gemm_fraction_of_16bit, self.sm_count,
                           self.memory_bandwidth_bytes_per_s)


def fp8_device_model(dev: DeviceModel, stack: SoftwareStack, kernels: KernelAssumptions = KERNELS) -> DeviceModel:
    """``dev`` running fp8 GEMMs as ``stack`` runs them (its own measured fp8 fraction where it has one)."""
    if stack.fp8_gemm_fraction_of_16bit is not None:
        kernels = replace(kernels, fp8_gemm_fraction_of_16bit=stack.fp8_gemm_fraction_of_16bit)
    return dev.fp8(kernels)


def tile_quantization(m: int, n: int, batch: int, sm_count: int, kernels: KernelAssumptions = KERNELS) -> float:
    """Useful / issued tile work of a (batched) GEMM with ``m x n`` outputs: partial tiles and a
    partial last wave of tiles idle part of the GPU (KernelAssumptions.gemm_tile)."""
    a, b = kernels.gemm_tile
    tiles = batch * min(math.ceil(m / a) * math.ceil(n / b), math.ceil(m / b) * math.ceil(n / a))
    waves = math.ceil(tiles / sm_count)
    return batch * m * n / (waves * sm_count * a * b)


def gemm_time_s(dev: DeviceModel, m: int, n: int, k: int, *, batch: int = 1, elem: int = 2,
                kernels: KernelAssumptions = KERNELS) -> float:
    """Time of ``batch`` products [m, k] x [k, n]: compute at the shape's efficiency, or moving its
    operands if that takes longer (a roofline), plus one kernel launch."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    flops = 2.0 * m * n * k * batch
    eff = dev.gemm_fraction * (tile_quantization(m, n, batch, dev.sm_count, kernels) if dev.sm_count else 1.0)
    compute = flops / (dev.peak_flops_per_s * eff)
    if not dev.sm_count:
        return compute
    memory = elem * batch * (m * k + k * n + m * n) / dev.memory_bandwidth_bytes_per_s
    return max(compute, memory) + kernels.kernel_launch_s


def linear_times_s(dev: DeviceModel, tokens: int, k: int, n: int, elem: int,
                   kernels: KernelAssumptions = KERNELS) -> tuple[float, float]:
    """(forward, backward) of a linear layer [tokens, k] x [k, n]: backward is the input gradient
    [tokens, n] x [n, k] and the weight gradient [k, tokens] x [tokens, n]."""
    fwd = gemm_time_s(dev, tokens, n, k, elem=elem, kernels=kernels)
    bwd = (gemm_time_s(dev, tokens, k, n, elem=elem, kernels=kernels)
           + gemm_time_s(dev, k, n, tokens, elem=elem, kernels=kernels))
    return fwd, bwd


@dataclass(frozen=True)
class BlockTime:
    forward_s: float
    backward_s: float
    selective_recompute_s: float
    """forward work selective recomputation repeats (the unfused attention core)"""
    sequence_parallel_saving_s: float
    """forward + backward time sequence parallel removes at this TP degree"""


def block_time(shape: ModelShape, s: int, b: int, tp: int, dev: DeviceModel, stack: SoftwareStack, elem: int,
               kernels: KernelAssumptions = KERNELS, fp8: DeviceModel | None = None) -> BlockTime:
    """One block's times on one of ``tp`` ranks for a micro-batch of ``b`` sequences (module docstring).
    ``fp8``: the device's fp8 model; its four linear layers then run fp8 GEMMs (1-byte operands),
    each casting its input in forward and its output gradient in backward
    (``KernelAssumptions.fp8_cast_bytes_per_element``)."""
    h, d, f = shape.hidden, shape.head_dim, shape.ffn_hidden
    kv = shape.kv_heads * d
    heads = shape.heads // tp
    tokens = b * s
    bw = dev.memory_bandwidth_bytes_per_s
    fwd = bwd = 0.0
    gate = 2 if shape.mlp == "swiglu" else 1
    for k_in, n_out in ((h, (h + 2 * kv) // tp), (h // tp, h), (h, gate * f // tp), (f // tp, h)):
        if fp8 is None:
            lf, lb = linear_times_s(dev, tokens, k_in, n_out, elem, kernels)
        else:
            lf, lb = linear_times_s(fp8, tokens, k_in, n_out, 1, kernels)
            lf += tokens * k_in * kernels.fp8_cast_bytes_per_element / bw + kernels.kernel_launch_s
            lb += tokens * n_out * kernels.fp8_cast_bytes_per_element / bw + kernels.kernel_launch_s
        fwd, bwd = fwd + lf, bwd + lb
    # attention core
    scores = b * heads * s * s
    if stack.attention == "unfused":
        qk = gemm_time_s(dev, s, s, d, batch=b * heads, elem=elem, kernels=kernels)
        pv = gemm_time_s(dev, s, d, s, batch=b * heads, elem=elem, kernels=kernels)
        qk_b = 2 * gemm_time_s(dev, s, d, s, batch=b * heads, elem=elem, kernels=kernels)
        pv_b = (gemm_time_s(dev, s, s, d, batch=b * heads, elem=elem, kernels=kernels)
                + gemm_time_s(dev, d, s, s, batch=b * heads, elem=elem, kernels=kernels))
        per_score = kernels.unfused_softmax_bytes_per_score + (
            kernels.attention_dropout_bytes_per_score if stack.dropout else 0.0)
        mem_fwd = scores * per_score / bw
        attn_fwd = qk + pv + mem_fwd
        attn_bwd = qk_b + pv_b + kernels.elementwise_backward_ratio * mem_fwd
        selective = attn_fwd
    else:
        fallback = dev.gemm_fraction * kernels.flash_fraction_of_gemm_fallback
        key = (stack.attention, dev.family)
        frac_fwd = kernels.attention_forward_fraction.get(key, fallback) if dev.sm_count else fallback
        frac_bwd = kernels.attention_backward_fraction.get(key, fallback) if dev.sm_count else fallback
        flops = 4.0 * scores * d * (0.5 if kernels.causal_flash_skips_masked_half else 1.0)
        attn_fwd = flops / (dev.peak_flops_per_s * frac_fwd)
        attn_bwd = kernels.flash_backward_flops_ratio * flops / (dev.peak_flops_per_s * frac_bwd)
        selective = 0.0
    fwd, bwd = fwd + attn_fwd, bwd + attn_bwd
    # elementwise: residual stream (split only by sequence parallel) and the MLP activation (split by TP)
    resid_add = (kernels.residual_bytes_per_h + (1 if stack.dropout else 0)) * h
    stream_bytes = 2 * kernels.norm_bytes_per_h * h + 2 * resid_add
    act = "gelu" if shape.mlp == "gelu" else ("swiglu_fused" if stack.fused_elementwise else "swiglu")
    mlp_bytes = kernels.mlp_activation_bytes_per_f[act] * f / tp
    stream_fwd = tokens * stream_bytes / bw
    ew_fwd = stream_fwd + tokens * mlp_bytes / bw
    fwd += ew_fwd
    bwd += kernels.elementwise_backward_ratio * ew_fwd
    sp_saving = stream_fwd * (1 + kernels.elementwise_backward_ratio) * (1 - 1 / tp)
    return BlockTime(fwd, bwd, selective, sp_saving)


def head_time(shape: ModelShape, s: int, b: int, vocab_tp: int, dev: DeviceModel, elem: int,
              kernels: KernelAssumptions = KERNELS) -> tuple[float, float]:
    """(forward, backward) of the final norm, LM head and loss on one of ``vocab_tp`` ranks."""
    tokens, h, v = b * s, shape.hidden, shape.vocab // vocab_tp
    fwd, bwd = linear_times_s(dev, tokens, h, v, elem, kernels)
    loss = tokens * v * kernels.cross_entropy_bytes_per_logit / dev.memory_bandwidth_bytes_per_s
    norm = tokens * kernels.norm_bytes_per_h * h / dev.memory_bandwidth_bytes_per_s
    return fwd + loss / 3 + norm, bwd + 2 * loss / 3 + kernels.elementwise_backward_ratio * norm


# --------------------------------------------------------------------------------------------
# the profile
# --------------------------------------------------------------------------------------------

def analytic_model_profile(shape: ModelShape, cluster: ClusterProfile, *, precision: str = "bf16",
                           mbs_list: tuple[int, ...] = (1, 2, 4, 8), tp_list: tuple[int, ...] = (1, 2, 4, 8),
                           seq_len: int | None = None, compute_flops_per_s: float | None = None,
                           stack: SoftwareStack | str = DEFAULT_STACK,
                           kernels: KernelAssumptions = KERNELS) -> ModelProfile:
    """A model profile for ``shape`` on ``cluster``'s device, trained by ``stack`` (default: autoplan's
    own executor), derived from GEMM shapes, bytes and kernel rates (module docstring).

    TP degrees in ``tp_list`` that do not divide the heads, KV heads and MLP width are skipped
    (t = 1 is always kept).  ``compute_flops_per_s`` overrides the device's achievable rate (for
    example for fp32 on a GPU, whose catalogue rate is the 16-bit one) and uses the flat model."""
    if precision not in BYTES_PER_ELEMENT:
        raise InputError(f"unknown precision {precision!r} (known: {', '.join(BYTES_PER_ELEMENT)})")
    stk = stack_named(stack) if isinstance(stack, str) else stack
    elem = BYTES_PER_ELEMENT[precision]
    s = shape.seq_len if seq_len is None else seq_len
    if s < 1 or not mbs_list or any(m < 1 for m in mbs_list):
        raise InputError("analytic profile: seq_len and every micro-batch size must be positive")
    dev = DeviceModel.of(cluster, precision, compute_flops_per_s, kernels)
    if dev.peak_flops_per_s <= 0:
        raise InputError(f"analytic profile: compute rate must be positive, got {dev.peak_flops_per_s}")
    fp8 = fp8_device_model(dev, stk, kernels) if is_fp8(precision) else None
    # torchao's rowwise fp8 under tensor parallel ran no faster than bf16 through mid-2025 (torchtitan
    # issue 1207: Llama 3 8B, TP 2, 5189 tokens/s rowwise against 5378 in bf16): there the GEMMs run at
    # the 16-bit rate (the 16-bit device model in place of the fp8 one), the casts are still paid
    rowwise_tp_at_16bit = precision == "fp8-rowwise" and stk.fp8_rowwise_tp_at_16bit_rate
    mem_bw = dev.memory_bandwidth_bytes_per_s
    allowed = set(tp_degrees_allowed(shape))
    tps = sorted({1} | {t for t in tp_list if t in allowed})
    mbs_vals = sorted(set(mbs_list))
    vocab_tps = tps if stk.vocab_parallel else [1]
    # what a training run sustains of the kernel model's rate (per chip), and how much faster a newer
    # release of the software runs the same kernels (SoftwareStack.release_speedup)
    derate = 1.0 / (kernels.sustained_fraction.get(dev.family, 1.0) * stk.release_speedup) if dev.sm_count else 1.0

    kinds: dict[str, LayerKindProfile] = {}
    for kind in ("embed", "block", "head"):
        flops = forward_flops_per_sample(kind, shape, s)
        timings = []
        for tp in (tps if kind == "block" else vocab_tps):
            for b in mbs_vals:
                extra = {}
                if kind == "embed":
                    # gather b*s rows and write them; backward also writes the dense V/t x h gradient
                    fwd = 2 * s * b * shape.hidden * elem / mem_bw
                    bwd = (2 * s * b * shape.hidden + shape.vocab // tp * shape.hidden) * elem / mem_bw
                elif kind == "head":
                    fwd, bwd = head_time(shape, s, b, tp, dev, elem, kernels)
                else:
                    bt = block_time(shape, s, b, tp, dev, stk, elem, kernels,
                                    fp8=dev if tp > 1 and rowwise_tp_at_16bit else fp8)
                    fwd, bwd = bt.forward_s, bt.backward_s
                    extra = dict(selective_recompute_s=bt.selective_recompute_s,
                                 sequence_parallel_saving_s=bt.sequence_parallel_saving_s)
                fwd, bwd = fwd * derate, bwd * derate
                extra = {k: v * derate for k, v in extra.items()}
                out_elems = s * b * (shape.vocab if kind == "head" else shape.hidden)
                saved = saved_activation_bytes(kind, shape, s, b, tp, elem, stk, vocab_tp=tp, fp8=fp8 is not None)
                timings.append(LayerTiming(mbs=b, tp=tp, forward_s=fwd, backward_s=bwd,
                                           saved_activation_bytes=saved, output_bytes=out_elems * elem, **extra))
        n = param_count(kind, shape)
        kinds[kind] = LayerKindProfile(param_count=n, param_bytes=n * elem,
                                       tp_shardable=(kind == "block" or stk.vocab_parallel),
                                       timings=timings, flops_per_sample=flops)

    layers, edges = layer_chain(shape)
    environment = {
        "cluster": cluster.name, "device": cluster.device.name or cluster.device.type,
        "compute_flops_per_s": dev.peak_flops_per_s * dev.gemm_fraction, "memory_bandwidth_bytes_per_s": mem_bw,
        "model": ("GEMMs by shape (tile/wave quantization, roofline), attention kernel, elementwise bytes"
                  if dev.sm_count else "FLOPs / achievable rate (flat); elementwise bytes / bandwidth"),
        "software_stack": stk.name,
        "activations": "Korthikanti et al. 2022, TP without sequence parallel, terms per software stack",
    }
    return ModelProfile(model_spec=shape.name, shape=shape.to_dict(), precision=precision, seq_len=s,
                        layers=layers, edges=edges,
                        kinds=kinds, environment=environment,
                        optimizer_step_s_per_param=ADAMW_BYTES_PER_PARAM[precision] / mem_bw,
                        optimizer_step_s_per_param_sgd=SGD_BYTES_PER_PARAM[precision] / mem_bw,
                        source="analytic")
