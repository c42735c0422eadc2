"""Deterministic synthetic batches, identical on every rank.

Each row is a window of one random token stream and the labels are the same window shifted by one,
so the model can learn (the loss falls) and every layout sees exactly the same numbers::

    tokens, labels = synthetic_batch(step=0, global_batch=8, seq_len=32, vocab=256, seed=0)
    # tokens, labels: int64 [8, 32]; labels[:, :-1] == tokens[:, 1:]

A DP rank takes rows ``[dp_rank * per, (dp_rank + 1) * per)`` with ``per = global_batch // dp``
(:func:`dp_slice`).
"""

from __future__ import annotations

import torch

_STREAM_MOTIF = 7
"""the stream repeats a random motif of this many tokens with noise, so there is something to learn"""


def synthetic_batch(step: int, global_batch: int, seq_len: int, vocab: int, seed: int = 0
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, labels)``, both int64 ``[global_batch, seq_len]``, a function of the arguments only."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    motif = torch.randint(0, vocab, (global_batch, _STREAM_MOTIF), generator=g)
    reps = (seq_len + 1 + _STREAM_MOTIF - 1) // _STREAM_MOTIF
    stream = motif.repeat(1, reps)[:, : seq_len + 1]                     # [B, s+1]
    noise = torch.rand(stream.shape, generator=g) < 0.1
    stream = torch.where(noise, torch.randint(0, vocab, stream.shape, generator=g), stream)
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def dp_slice(batch: torch.Tensor, *, dp_rank: int, dp_size: int) -> torch.Tensor:
    """Rows ``[dp_rank * per, (dp_rank + 1) * per)`` of ``batch`` ``[B, ...]``, ``per = B // dp_size``."""
    if batch.shape[0] % dp_size:
        raise ValueError(f"batch of {batch.shape[0]} rows does not split over dp={dp_size}")
    per = batch.shape[0] // dp_size
    return batch[dp_rank * per:(dp_rank + 1) * per]
