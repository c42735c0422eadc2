"""A user model for autoplan, given as ``examples/user_model.py:FACTORY``.

Two factories:

- ``build``: a unit model (``embed``, ``blocks``, ``head``) of residual MLP blocks with its own
  tensor-parallel plan (``mlp.fc_in`` column-parallel, ``mlp.fc_out`` row-parallel)::

      autoplan profile model --model examples/user_model.py:build --out mlp.json
      autoplan solve --model examples/user_model.py:build --cluster cluster.json --global-batch 8

- ``build_sequential``: the same computation as a plain ``nn.Sequential`` (embedding, blocks,
  head as elements ``block.0 .. block.N+1``); no tensor parallel, data and pipeline parallel only.

Both say what they train on with ``vocab_size`` and ``seq_len``; the output is logits
``[b, s, vocab_size]`` for the token cross-entropy loss.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from autoplan.models.transformer import TensorParallelPlan
from autoplan.models.units import UnitModel

VOCAB, SEQ_LEN, HIDDEN, FFN, LAYERS = 128, 16, 32, 128, 4


class MLP(nn.Module):
    """``fc_out(gelu(fc_in(x)))``."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.fc_in = nn.Linear(hidden, ffn)
        self.fc_out = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(torch.nn.functional.gelu(self.fc_in(x)))


class MLPBlock(nn.Module):
    """Pre-norm residual MLP: ``x + mlp(norm(x))``, x ``[b, s, h]``."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Head(nn.Module):
    """Final norm and projection to the vocabulary: ``[b, s, h] -> [b, s, vocab]``."""

    def __init__(self, hidden: int, vocab: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.proj = nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x))


class MLPStack(UnitModel):
    """Embedding, ``LAYERS`` residual MLP blocks, head; units ``embed, block.i, head``."""

    # Megatron pair; under sequence parallel the norm runs on a sequence slice and the MLP input is gathered.
    tp_plan = TensorParallelPlan(colwise=("mlp.fc_in",), rowwise=("mlp.fc_out",), sp_norms=("norm",),
                                 sp_gather=("mlp",))

    def __init__(self) -> None:
        super().__init__(nn.Embedding(VOCAB, HIDDEN), [MLPBlock(HIDDEN, FFN) for _ in range(LAYERS)],
                         Head(HIDDEN, VOCAB), vocab_size=VOCAB, seq_len=SEQ_LEN)


def build() -> MLPStack:
    """The unit-model factory (autoplan seeds torch's RNG before calling it)."""
    return MLPStack()


def build_sequential() -> nn.Sequential:
    """The same layers as a plain ``nn.Sequential``; ``vocab_size`` comes from its embedding."""
    seq = nn.Sequential(nn.Embedding(VOCAB, HIDDEN), *[MLPBlock(HIDDEN, FFN) for _ in range(LAYERS)],
                        Head(HIDDEN, VOCAB))
    seq.seq_len = SEQ_LEN
    return seq
