"""The causal attention core and the sequence positions of a unit model's tokens.

Two small protocols let the executor's context parallel (:mod:`autoplan.execute.cp`) lay out a model
without knowing its classes:

- a module that runs causal attention holds its core as ``attention_core``, a parameter-free
  module called ``core(q, k, v, scale=None)`` with ``q [b, a, s, hd]``, ``k, v [b, kv, s, hd]``
  (``kv`` divides ``a``: grouped-query attention keeps the smaller K/V until the core) returning
  ``[b, a, s, hd]``. The default is :class:`CausalAttention`; context parallel swaps in a core that
  exchanges keys and values between the ranks that hold parts of the sequence;
- a module that needs token positions (learned position embeddings, rotary embeddings) holds
  ``sequence_shard`` (``None`` for the whole sequence) and asks :func:`sequence_positions` for the
  global positions of the tokens it holds.

A :class:`SequenceShard` is the load-balanced causal split of context parallel: the sequence of
``s`` tokens is cut into ``2 * size`` chunks of ``c = s / (2 * size)`` and rank ``i`` holds chunks
``i`` and ``2 * size - 1 - i`` (the early chunk attends to few keys, the late one to many, so every
rank does the same attention work)::

    shard = SequenceShard(rank=1, size=2)      # s = 8: chunks of 2, rank 1 holds chunks 1 and 2
    shard.positions(4)                         # tensor([2, 3, 4, 5])
    shard.take(torch.arange(8)[None], dim=1)   # tensor([[2, 3, 4, 5]])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from autoplan.errors import InputError


@dataclass(frozen=True)
class SequenceShard:
    """Which tokens of every sequence one context-parallel rank holds (see the module docstring)."""

    rank: int
    """this rank's index in the context-parallel group"""
    size: int
    """ranks in the context-parallel group (cp)"""

    def check(self, seq_len: int) -> None:
        """Refuse a sequence the load-balanced split cannot cut: ``seq_len`` must divide by ``2 * size``."""
        if seq_len % (2 * self.size):
            raise InputError(f"context parallel cp={self.size} cuts each sequence into 2*cp = {2 * self.size} "
                             f"equal chunks: sequence length {seq_len} is not divisible by {2 * self.size}")

    def chunks(self) -> tuple[int, int]:
        """The two chunk indices this rank holds, in the order it holds them."""
        return self.rank, 2 * self.size - 1 - self.rank

    def take(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        """This rank's share of ``x`` along its sequence dim ``dim``: chunks ``i`` and ``2*size-1-i``
        concatenated (``x`` itself when ``size == 1``)."""
        if self.size == 1:
            return x
        self.check(x.shape[dim])
        c = x.shape[dim] // (2 * self.size)
        return torch.cat([x.narrow(dim, i * c, c) for i in self.chunks()], dim=dim)

    def positions(self, local_len: int, device: torch.device | str | None = None) -> torch.Tensor:
        """int64 ``[local_len]``: the global positions of the ``local_len`` tokens this rank holds."""
        if self.size == 1:
            return torch.arange(local_len, device=device)
        if local_len % 2:
            raise InputError(f"context parallel: a rank holds two equal chunks, got {local_len} tokens")
        c = local_len // 2
        return torch.cat([torch.arange(i * c, (i + 1) * c, device=device) for i in self.chunks()])

    def all_positions(self, local_len: int, device: torch.device | str | None = None) -> torch.Tensor:
        """int64 ``[size * local_len]``: the global positions of every rank's tokens, rank after rank
        (the order in which an all-gather over the group lays them out)."""
        return torch.cat([SequenceShard(r, self.size).positions(local_len, device) for r in range(self.size)])


def sequence_positions(shard: SequenceShard | None, local_len: int, device: torch.device | str | None = None
                       ) -> torch.Tensor:
    """Global positions of a module's ``local_len`` tokens: ``0..local_len-1`` without context parallel."""
    return torch.arange(local_len, device=device) if shard is None else shard.positions(local_len, device)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``[b, kv, s, hd]`` -> ``[b, kv * n_rep, s, hd]``: each K/V head serves ``n_rep`` query heads."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


class CausalAttention(nn.Module):
    """``softmax(q k^T * scale + causal mask) v`` on the whole sequence (no parameters).

    ``forward(q [b, a, s, hd], k [b, kv, s, hd], v, scale=None) -> [b, a, s, hd]``; ``scale``
    ``None`` is ``1/sqrt(hd)``. K/V heads are repeated to ``a`` here (grouped-query attention).
    """

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
                ) -> torch.Tensor:
        n_rep = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), is_causal=True,
                                              scale=scale)
