"""The reference decoder-only transformer and its tensor-parallel plan.

Layer names are the pipeline units the planner places on stages::

    embed            token embedding                    tokens [b, s] -> x [b, s, h]
    block.0 .. N-1   pre-norm attention + MLP block     x [b, s, h]   -> x [b, s, h]
    head             final RMSNorm + LM head            x [b, s, h]   -> logits [b, s, vocab]

The module keeps blocks in an ``nn.ModuleDict`` keyed ``"0".."N-1"`` and lets ``embed``/``head``
be ``None``, so a pipeline stage is this same class with the layers it does not own deleted
(the torchtitan way) and parameter names stay identical across layouts (needed for
distributed-checkpoint resharding).

Run::

    python -c "from autoplan.models.transformer import *; m = build_model(BUILTIN_SHAPES['gpt-tiny'])"
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autoplan.models.attention import CausalAttention
from autoplan.models.shapes import BUILTIN_SHAPES, ModelShape, tp_degrees_allowed  # noqa: F401  (re-exported)
from autoplan.models.units import TensorParallelPlan, UnitModel  # noqa: F401  (TensorParallelPlan re-exported)


class Attention(nn.Module):
    """Causal self-attention; the core ``softmax(q k^T) v`` is ``attention_core`` (see
    :mod:`autoplan.models.attention`), which context parallel replaces. No position encoding: the
    causal mask alone orders the tokens."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        h, hd = shape.hidden, shape.head_dim
        self.head_dim = hd
        self.wq = nn.Linear(h, shape.heads * hd, bias=False)
        self.wk = nn.Linear(h, shape.kv_heads * hd, bias=False)
        self.wv = nn.Linear(h, shape.kv_heads * hd, bias=False)
        self.wo = nn.Linear(shape.heads * hd, h, bias=False)
        self.attention_core: nn.Module = CausalAttention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # Under TP the column-parallel projections return local shards: -1 is the local head count.
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)  # [b, a_local, s, hd]
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)  # [b, kv_local, s, hd]
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        o = self.attention_core(q, k, v)                               # [b, a_local, s, hd]
        o = o.transpose(1, 2).reshape(b, s, -1)
        return self.wo(o)


class MLP(nn.Module):
    """GeLU MLP ``w2(gelu(w1 x))``, or SwiGLU ``w2(silu(w1 x) * w3 x)`` when ``shape.mlp == "swiglu"``."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.w1 = nn.Linear(shape.hidden, shape.ffn_hidden, bias=False)
        self.w2 = nn.Linear(shape.ffn_hidden, shape.hidden, bias=False)
        self.w3 = nn.Linear(shape.hidden, shape.ffn_hidden, bias=False) if shape.mlp == "swiglu" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w3 is not None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.attn_norm = nn.RMSNorm(shape.hidden, eps=1e-5)
        self.attn = Attention(shape)
        self.mlp_norm = nn.RMSNorm(shape.hidden, eps=1e-5)
        self.mlp = MLP(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Head(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.norm = nn.RMSNorm(shape.hidden, eps=1e-5)
        self.proj = nn.Linear(shape.hidden, shape.vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x))


class Transformer(UnitModel):
    """Decoder-only transformer whose pipeline units are ``embed``, ``block.i``, ``head``."""

    tp_plan = None  # set below: REFERENCE_TP_PLAN (defined after the modules)

    def __init__(self, shape: ModelShape):
        super().__init__(nn.Embedding(shape.vocab, shape.hidden), [Block(shape) for _ in range(shape.layers)],
                         Head(shape), vocab_size=shape.vocab, seq_len=shape.seq_len)
        self.shape = shape
        if shape.mlp == "swiglu":
            self.tp_plan = SWIGLU_TP_PLAN   # the gate w3 is column-parallel like w1


LAYER_KINDS = ("embed", "block", "head")
"""the kinds of pipeline unit of the reference transformer (each ``block.i`` is a ``block``)"""


def unit_names(shape: ModelShape) -> list[str]:
    return ["embed"] + [f"block.{i}" for i in range(shape.layers)] + ["head"]


def init_weights(model: nn.Module, seed: int) -> None:
    """Deterministic initialisation, identical whatever the later layout (GPT-2 style std 0.02,
    residual projections scaled by 1/sqrt(2*layers))."""
    g = torch.Generator().manual_seed(seed)
    n_layers = max(1, len(getattr(model, "blocks", [])) or 1)
    for name, p in model.named_parameters():
        with torch.no_grad():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)


def build_model(shape: ModelShape, seed: int = 0) -> Transformer:
    """The full model on CPU, initialised deterministically from ``seed``."""
    model = Transformer(shape)
    init_weights(model, seed)
    return model


# Tensor-parallel plan: Megatron column/row pairs. Keys are relative to one Block.
# Column-parallel layers split their output features (and so the heads); row-parallel layers
# split their input features and all-reduce (or reduce-scatter under SP) the output.
TP_COLWISE = ("attn.wq", "attn.wk", "attn.wv", "mlp.w1")
TP_ROWWISE = ("attn.wo", "mlp.w2")


REFERENCE_TP_PLAN = TensorParallelPlan(colwise=TP_COLWISE, rowwise=TP_ROWWISE,
                                       sp_norms=("attn_norm", "mlp_norm"), sp_gather=("attn", "mlp"))


SWIGLU_TP_PLAN = TensorParallelPlan(colwise=TP_COLWISE + ("mlp.w3",), rowwise=TP_ROWWISE,
                                    sp_norms=("attn_norm", "mlp_norm"), sp_gather=("attn", "mlp"))

Transformer.tp_plan = REFERENCE_TP_PLAN
