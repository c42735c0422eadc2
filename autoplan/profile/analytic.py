"""An analytic model profile: layer costs from FLOPs and bytes over a device's rates.

For hardware one does not have (``autoplan solve --model gpt3-175b --cluster dgx-a100-80gb:128``)
the profile is derived, not measured.  Per layer kind, per sample of ``s`` tokens (``h`` hidden,
``a`` heads, ``kv`` = kv_heads*head_dim, ``f`` ffn_hidden, ``V`` vocab)::

    forward FLOPs (a multiply-add is 2 FLOPs)
      block   2*s*h*(2h + 2kv)       q, k, v, o projections
            + 4*s*h*f                MLP
            + 4*s^2*h                scores and attention-weighted values (no causal discount,
                                     as Megatron-LM counts: with kv = h, f = 4h this is the
                                     standard 24*s*h^2*(1 + s/(6h)))
      head    2*s*h*V
      embed   0                      a gather: memory-bound, timed as bytes / memory bandwidth
    backward = 2 x forward (two matrix products per forward one)

    time_s = FLOPs / t / device.compute_flops_per_s           (block: one of t TP ranks)

Saved activations per micro-batch of ``b`` (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", Table 2; DESIGN.md), in 16-bit units and then scaled by
bytes-per-element / 2 (so fp32 doubles it)::

    block  s*b*(10h + (4h + 4kv + 4f)/t + 5*a*s/t)   q, o input; k, v; MLP inner (2 tensors)

With kv = h and f = 4h that is s*b*h*(10 + 24/t + 5as/(ht)), Megatron TP WITHOUT sequence
parallel (norm inputs, the QKV and MLP inputs and the dropout masks stay whole on every TP rank),
which is also what ``layers.profile_model`` measures; at t = 1 it is DESIGN.md's s*b*h*(34 + 5as/h).
Sequence parallel would divide the 10h term by t as well; the profile does not assume it.
``head`` saves its two inputs (norm, projection) and the fp32 log-softmax of the loss
(2*s*b*h*elem + 4*s*b*V); ``embed`` saves the int64 token ids (8*s*b).

Output bytes (what a pipeline cut sends): s*b*h*elem (head: its logits, s*b*V*elem).
Optimizer step per parameter: memory-bound, ``ADAMW_BYTES_PER_PARAM`` / memory bandwidth.
"""

from __future__ import annotations

from autoplan.errors import InputError
from autoplan.models.shapes import ModelShape
from autoplan.models.transformer import tp_degrees_allowed
from autoplan.profile.formats import ClusterProfile, LayerInfo, LayerKindProfile, LayerTiming, ModelProfile

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2}
TOKEN_ID_BYTES = 8          # int64 token ids
LOSS_SOFTMAX_BYTES = 4      # cross-entropy computes log-softmax in fp32

ADAMW_BYTES_PER_PARAM = {
    # mixed precision: read fp32 master, fp32 grad, m, v (16); write master, m, v (12), 16-bit weight (2)
    "bf16": 30, "fp16": 30,
    # fp32: read weight, grad, m, v (16); write weight, m, v (12)
    "fp32": 28,
}
SGD_BYTES_PER_PARAM = {"bf16": 14, "fp16": 14, "fp32": 12}   # read weight and grad, write weight (+16-bit copy)

FALLBACK_FLOPS_PER_BYTE = 153.0
"""machine balance used when a cluster profile gives no memory bandwidth: the A100's
312e12 FLOP/s / 2.039e12 B/s (NVIDIA A100 datasheet)"""


def forward_flops_per_sample(kind: str, shape: ModelShape, seq_len: int) -> float:
    """Forward FLOPs of one layer of ``kind`` on one sequence of ``seq_len`` tokens (unsharded)."""
    s, h = seq_len, shape.hidden
    if kind == "block":
        kv = shape.kv_heads * shape.head_dim
        return 2.0 * s * h * (2 * h + 2 * kv) + 4.0 * s * h * shape.ffn_hidden + 4.0 * s * s * h
    if kind == "head":
        return 2.0 * s * h * shape.vocab
    if kind == "embed":
        return 0.0
    raise InputError(f"unknown layer kind {kind!r}")


def saved_activation_bytes(kind: str, shape: ModelShape, seq_len: int, mbs: int, tp: int,
                           bytes_per_element: int) -> int:
    """Bytes saved for backward by one layer on one TP rank, per micro-batch (see module docstring)."""
    s, b, h = seq_len, mbs, shape.hidden
    if kind == "block":
        kv = shape.kv_heads * shape.head_dim
        per_token_16bit = 10 * h + (4 * h + 4 * kv + 4 * shape.ffn_hidden) / tp + 5 * shape.heads * s / tp
        return int(s * b * per_token_16bit * bytes_per_element / 2)
    if kind == "head":
        return 2 * s * b * h * bytes_per_element + LOSS_SOFTMAX_BYTES * s * b * shape.vocab
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


def _memory_bandwidth(cluster: ClusterProfile) -> float:
    bw = cluster.device.memory_bandwidth_bytes_per_s
    return bw if bw > 0 else cluster.device.compute_flops_per_s / FALLBACK_FLOPS_PER_BYTE


def analytic_model_profile(shape: ModelShape, cluster: ClusterProfile, *, precision: str = "bf16",
                           mbs_list: tuple[int, ...] = (1, 2, 4, 8), tp_list: tuple[int, ...] = (1, 2, 4, 8),
                           seq_len: int | None = None, compute_flops_per_s: float | None = None) -> ModelProfile:
    """A model profile for ``shape`` on ``cluster``'s device, derived from FLOPs and bytes.

    TP degrees in ``tp_list`` that do not divide the heads, KV heads and MLP width are skipped
    (t = 1 is always kept).  ``compute_flops_per_s`` overrides the device's achievable rate (for
    example for fp32 on a GPU, whose catalogue rate is the 16-bit one)."""
    if precision not in BYTES_PER_ELEMENT:
        raise InputError(f"unknown precision {precision!r} (known: {', '.join(BYTES_PER_ELEMENT)})")
    elem = BYTES_PER_ELEMENT[precision]
    s = shape.seq_len if seq_len is None else seq_len
    if s < 1 or not mbs_list or any(m < 1 for m in mbs_list):
        raise InputError("analytic profile: seq_len and every micro-batch size must be positive")
    rate = cluster.device.compute_flops_per_s if compute_flops_per_s is None else compute_flops_per_s
    if rate <= 0:
        raise InputError(f"analytic profile: compute rate must be positive, got {rate}")
    mem_bw = _memory_bandwidth(cluster)
    allowed = set(tp_degrees_allowed(shape))
    tps = sorted({1} | {t for t in tp_list if t in allowed})
    mbs_vals = sorted(set(mbs_list))

    kinds: dict[str, LayerKindProfile] = {}
    for kind in ("embed", "block", "head"):
        flops = forward_flops_per_sample(kind, shape, s)
        timings = []
        for tp in (tps if kind == "block" else [1]):
            for b in mbs_vals:
                if kind == "embed":
                    # gather b*s rows and write them; backward also writes the dense V x h gradient
                    fwd = 2 * s * b * shape.hidden * elem / mem_bw
                    bwd = (2 * s * b * shape.hidden + shape.vocab * shape.hidden) * elem / mem_bw
                else:
                    fwd = flops * b / tp / rate
                    bwd = 2 * fwd
                out_elems = s * b * (shape.vocab if kind == "head" else shape.hidden)
                timings.append(LayerTiming(mbs=b, tp=tp, forward_s=fwd, backward_s=bwd,
                                           saved_activation_bytes=saved_activation_bytes(kind, shape, s, b, tp, elem),
                                           output_bytes=out_elems * elem))
        n = param_count(kind, shape)
        kinds[kind] = LayerKindProfile(param_count=n, param_bytes=n * elem, tp_shardable=(kind == "block"),
                                       timings=timings, flops_per_sample=flops)

    layers, edges = layer_chain(shape)
    environment = {
        "cluster": cluster.name, "device": cluster.device.name or cluster.device.type,
        "compute_flops_per_s": rate, "memory_bandwidth_bytes_per_s": mem_bw,
        "model": "FLOPs / achievable rate; backward = 2 x forward; embed memory-bound",
        "activations": "Korthikanti et al. 2022, TP without sequence parallel",
    }
    return ModelProfile(model_spec=shape.name, shape=shape.to_dict(), precision=precision, seq_len=s,
                        layers=layers, edges=edges,
                        kinds=kinds, environment=environment,
                        optimizer_step_s_per_param=ADAMW_BYTES_PER_PARAM[precision] / mem_bw,
                        optimizer_step_s_per_param_sgd=SGD_BYTES_PER_PARAM[precision] / mem_bw,
                        source="analytic")
