"""Deterministic synthetic batches, identical on every rank.

Each row is a window of a random token stream and the labels are the same window shifted by one,
so the model can learn (the loss falls) and every layout sees exactly the same numbers::

    tokens, labels = synthetic_batch(step=0, global_batch=8, seq_len=32, vocab=256, seed=0)
    # tokens, labels: int64 [8, 32]; labels[:, :-1] == tokens[:, 1:]

A DP rank takes rows ``[dp_rank * per, (dp_rank + 1) * per)`` with ``per = global_batch // dp``
(:func:`dp_slice`).
"""

from __future__ import annotations

import torch

_NOISE = 0.1
"""fraction of stream tokens drawn uniformly instead of from the fixed successor table"""


def synthetic_batch(step: int, global_batch: int, seq_len: int, vocab: int, seed: int = 0
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, labels)``, both int64 ``[global_batch, seq_len]``, a function of the arguments only.

    Each row follows a fixed random successor table ``next = succ[token]`` (the same for every step
    of a ``seed``) with ``_NOISE`` uniform tokens mixed in, so the best loss is far below
    ``ln(vocab)`` and a model learns the table within tens of steps.
    """
    succ = torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed * 1_000_003 + step + 1)
    stream = torch.empty(global_batch, seq_len + 1, dtype=torch.int64)
    stream[:, 0] = torch.randint(0, vocab, (global_batch,), generator=g)
    noise = torch.rand(global_batch, seq_len + 1, generator=g) < _NOISE
    uniform = torch.randint(0, vocab, (global_batch, seq_len + 1), generator=g)
    for t in range(1, seq_len + 1):
        stream[:, t] = torch.where(noise[:, t], uniform[:, t], succ[stream[:, t - 1]])
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()               # [B, s] each


def dp_slice(batch: torch.Tensor, *, dp_rank: int, dp_size: int) -> torch.Tensor:
    """Rows ``[dp_rank * per, (dp_rank + 1) * per)`` of ``batch`` ``[B, ...]``, ``per = B // dp_size``."""
    if batch.shape[0] % dp_size:
        raise ValueError(f"batch of {batch.shape[0]} rows does not split over dp={dp_size}")
    per = batch.shape[0] // dp_size
    return batch[dp_rank * per:(dp_rank + 1) * per]
