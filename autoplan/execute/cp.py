"""Context parallel: each of ``cp`` ranks holds a share of every sequence; attention exchanges K and V.

The split (:class:`~autoplan.models.attention.SequenceShard`) is load-balanced for the causal mask:
a sequence of ``s`` tokens is cut into ``2 * cp`` chunks and cp rank ``i`` holds chunks ``i`` and
``2*cp - 1 - i``, so tokens ``[b, s]`` become ``[b, s/cp]`` per rank, labels likewise
(:meth:`Parallelized.step <autoplan.execute.apply.Parallelized.step>` cuts both the same way).
Everything but attention is per token and runs unchanged on the local share; modules that use
positions (learned or rotary) read the global ones from their ``sequence_shard``.

Attention (every module's ``attention_core``, see :mod:`autoplan.models.attention`) needs every
earlier key. Two exchanges:

- **all-gather** (CPU, and any device without torch's machinery; the one tested here):
  :class:`AllGatherKVAttention`. Per attention layer the ranks all-gather their K and V (the
  ``kv_heads`` of grouped-query attention, before they are repeated to ``heads``), ``[b, kv, s/cp,
  hd]`` -> ``[b, kv, s, hd]`` in rank order, and each rank runs its local queries against all keys
  with the causal mask of the true positions (query at global position ``p`` sees keys at ``<= p``).
  Backward reduce-scatters the K/V gradients (:class:`AllGatherSequence`). torch's
  ``context_parallel`` cannot run here: the CPU SDPA kernel has no DTensor sharding rule.
- **torch's ring attention** (CUDA): :class:`TorchRingAttention` hands the core's SDPA call to
  ``torch.distributed.tensor.experimental``'s ``_ContextParallel`` module wrapper, whose flash /
  efficient / cuDNN ring kernels pass K/V around the cp ring with the same head-tail load balance.
  Written to torch 2.13's API and UNTESTED here (no multi-GPU machine).

Loss and gradients: each rank's loss is the mean over its own ``s/cp`` tokens of each row; all
ranks hold equally many tokens, so the mean of the ``cp`` local means is the mean over the sequence.
Parameter gradients are averaged over the ``dp x cp`` ranks (:meth:`ParallelMesh.grad_mesh`); with
the K/V gradients summed back to their owners by the reduce-scatter, that is the gradient of one
process on the whole sequence.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh

from autoplan.errors import LayoutError
from autoplan.models.attention import SequenceShard, repeat_kv


class AllGatherSequence(torch.autograd.Function):
    """All-gather along dim 0 over a process group in forward; reduce-scatter (sum) in backward.

    Forward: ``x [n, ...]`` on each of the group's ``g`` ranks -> ``[g * n, ...]``, rank 0's rows
    first, the same on every rank. Backward: the gradient ``[g * n, ...]`` (each rank's own, from
    its own queries) is summed over the ranks and rank ``r`` keeps rows ``[r * n, (r + 1) * n)``:
    the gradient of everything every rank computed from ``x``. Both are functional collectives
    (``_c10d_functional``), whose results selective recompute keeps rather than communicating
    again in backward.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return funcol.wait_tensor(funcol.all_gather_single(x.contiguous(), gather_dim=0, group=group))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = funcol.reduce_scatter_single(grad.contiguous(), "sum", scatter_dim=0, group=ctx.group)
        return funcol.wait_tensor(out), None


class AllGatherKVAttention(nn.Module):
    """Causal attention of this rank's queries against every rank's keys (no parameters).

    ``forward(q [b, a, L, hd], k [b, kv, L, hd], v, scale=None) -> [b, a, L, hd]`` with ``L = s/cp``
    the tokens this rank holds (positions ``shard.positions(L)``). K and V travel once, stacked, in
    one all-gather of ``2 * b * kv * L * hd`` elements per rank; the mask allows key position
    ``<= `` query position, which for the load-balanced chunks is not a triangle of the local block.
    """

    def __init__(self, shard: SequenceShard, group: dist.ProcessGroup):
        super().__init__()
        self.shard = shard
        self.group = group

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
                ) -> torch.Tensor:
        kv = torch.stack([k, v]).permute(3, 0, 1, 2, 4)               # [L, 2, b, kv, hd]
        kv = AllGatherSequence.apply(kv, self.group)                  # [cp*L, 2, b, kv, hd]
        k_all, v_all = kv.permute(1, 2, 3, 0, 4).unbind(0)            # [b, kv, cp*L, hd] each
        return attend_gathered(q, k_all, v_all, self.shard, scale)


def attend_gathered(q: torch.Tensor, k_all: torch.Tensor, v_all: torch.Tensor, shard: SequenceShard,
                    scale: float | None) -> torch.Tensor:
    """Causal attention of one rank's queries ``q [b, a, L, hd]`` (positions ``shard.positions(L)``)
    against every rank's keys and values ``[b, kv, cp*L, hd]`` in rank order (positions
    ``shard.all_positions(L)``): a query at global position ``p`` sees the keys at ``<= p``."""
    local = q.shape[2]
    q_pos = shard.positions(local, q.device)                          # [L]
    k_pos = shard.all_positions(local, q.device)                      # [cp*L]
    mask = q_pos[:, None] >= k_pos[None, :]                           # [L, cp*L], True: attend
    n_rep = q.shape[1] // k_all.shape[1]
    return F.scaled_dot_product_attention(q, repeat_kv(k_all, n_rep), repeat_kv(v_all, n_rep), attn_mask=mask,
                                          scale=scale)


class _CausalSDPA(nn.Module):
    """``F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)``: the call torch's
    ``_ContextParallel`` wrapper turns into ring attention."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
                ) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)


class TorchRingAttention(nn.Module):
    """Causal attention by torch's context-parallel ring kernels (CUDA only; UNTESTED here).

    Same contract as :class:`AllGatherKVAttention`. K/V are repeated to the query heads first
    (torch's ring SDPA takes equal head counts), then ``_CausalSDPA`` runs under torch's
    ``_ContextParallel(seq_dim=2)`` module wrapper, which makes q/k/v DTensors sharded on the
    sequence over ``cp_mesh`` and dispatches the flash/efficient/cuDNN SDPA ops to ring attention.
    torch's head-tail load balancer lays out chunks as :class:`SequenceShard` does.
    """

    def __init__(self, cp_mesh: DeviceMesh):
        super().__init__()
        from torch.distributed.tensor.experimental._attention import (
            _ContextParallel,
            _cp_options,
            _enable_context_parallel_dispatcher,
        )
        from torch.distributed.tensor.parallel import parallelize_module

        _cp_options.enable_load_balance = True   # chunks i and 2*cp-1-i, as our data split
        _enable_context_parallel_dispatcher()    # SDPA ops on DTensors -> ring attention
        self.sdpa = parallelize_module(_CausalSDPA(), cp_mesh, _ContextParallel(
            seq_dim=2, attention_type=_ContextParallel.AttentionType.SDPA))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
                ) -> torch.Tensor:
        n_rep = q.shape[1] // k.shape[1]
        return self.sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), scale)


def torch_ring_available(device_type: str) -> bool:
    """Whether torch's context-parallel ring attention can run on ``device_type`` (CUDA, with the
    experimental module importable)."""
    if device_type != "cuda":
        return False
    try:
        from torch.distributed.tensor.experimental._attention import _ContextParallel  # noqa: F401
    except ImportError:
        return False
    return True


def has_attention_core(model: nn.Module) -> bool:
    """Whether ``model`` exposes an ``attention_core`` anywhere (context parallel can lay it out)."""
    return any(hasattr(m, "attention_core") for m in model.modules())


def check_context_parallel(model: nn.Module, cp: int, seq_len: int | None) -> None:
    """Refuse cp > 1 (before any collective) for a model without ``attention_core`` modules, whose
    attention context parallel cannot reach, or a ``seq_len`` that does not cut into 2*cp chunks."""
    if cp == 1:
        return
    if not has_attention_core(model):
        raise LayoutError(f"cp={cp}: the model {type(model).__name__} exposes no attention_core module, so "
                          f"context parallel cannot exchange its keys and values (see autoplan.models.attention)")
    if seq_len is not None:
        SequenceShard(0, cp).check(seq_len)


def apply_cp(module: nn.Module, cp_mesh: DeviceMesh, *, use_torch_ring: bool) -> SequenceShard:
    """Lay out ``module`` (a pipeline chunk) for context parallel over ``cp_mesh``, in place.

    Every ``attention_core`` becomes :class:`TorchRingAttention` (``use_torch_ring``) or
    :class:`AllGatherKVAttention`; every module with a ``sequence_shard`` attribute gets this rank's
    shard, so its positions are global. Returns the shard (for cutting the data)."""
    shard = SequenceShard(rank=cp_mesh.get_local_rank(), size=cp_mesh.size())
    group = cp_mesh.get_group()
    for m in list(module.modules()):
        if hasattr(m, "attention_core"):
            m.attention_core = TorchRingAttention(cp_mesh) if use_torch_ring else AllGatherKVAttention(shard, group)
        if hasattr(m, "sequence_shard"):
            m.sequence_shard = shard
    return shard
