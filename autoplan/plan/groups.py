"""Communication groups and where they run: which (tp, dp, pp) groups cross nodes, how many of a
group's ranks share a node, one collective's time, and which data-parallel wrapper the executor uses.

Rank order, outermost to innermost: pp, dp, tp (tp innermost, so it gets the fastest links)::

    rank = (pp_i * dp + dp_i) * tp + tp_i
"""

from __future__ import annotations

from functools import lru_cache

from autoplan.plan.plan import Layout
from autoplan.profile.formats import ClusterProfile


@lru_cache(maxsize=4096)
def spans_nodes(dp: int, tp: int, pp: int, devices_per_node: int, num_nodes: int) -> tuple[bool, bool, bool]:
    """Whether any (tp, dp, pp) group crosses a node boundary, for the rank order
    rank = (pp_i * dp + dp_i) * tp + tp_i (tp innermost, so it gets the fastest links).

    Arithmetic, not an enumeration of the groups (16,384 GPUs have 16,384 of each): every group is
    an arithmetic progression base + i*stride (i < size) and a rank's node r // D grows with r, so a
    group spans nodes iff its first and last rank differ in node, i.e. iff (size-1)*stride >= D or
    base mod D >= D - (size-1)*stride. Residues of the bases repeat within D steps, so at most D^2
    bases are looked at whatever the world size."""
    if num_nodes <= 1:
        return False, False, False
    D = devices_per_node
    tp_bases = (k * tp for k in range(min(dp * pp, D)))
    dp_bases = (p * dp * tp + t for p in range(min(pp, D)) for t in range(min(tp, D)))
    pp_bases = (d * tp + t for d in range(min(dp, D)) for t in range(min(tp, D)))
    return (_progression_spans(tp_bases, 1, tp, D), _progression_spans(dp_bases, tp, dp, D),
            _progression_spans(pp_bases, dp * tp, pp, D))


def _progression_spans(bases, stride: int, size: int, per_node: int) -> bool:
    """Whether some group {base + i*stride : i < size} holds ranks of two nodes."""
    if size <= 1:
        return False
    reach = (size - 1) * stride
    return reach >= per_node or any(b % per_node >= per_node - reach for b in bases)


def collective_s(cluster: ClusterProfile, op: str, full_bytes: float, group: int, cross: bool) -> float:
    """Time of one collective whose full (unsharded) buffer is ``full_bytes``: the tensor for
    all-reduce, the gathered output for all-gather, the input for reduce-scatter (the size
    convention of the cluster profile's fits)."""
    if group <= 1 or full_bytes <= 0:
        return 0.0
    return cluster.collective_time_s(op, full_bytes, group, cross)


def group_ranks_per_node(stride: int, size: int, devices_per_node: int) -> int:
    """How many members of a group of ``size`` ranks spaced ``stride`` apart share one node
    (rank order (pp, dp, tp), tp innermost: a DP group's stride is tp)."""
    if stride >= devices_per_node or devices_per_node % stride:
        return 1
    return max(1, min(size, devices_per_node // stride))


def data_parallel_wrapper(layout: Layout) -> tuple[bool, bool]:
    """(DDP, FSDP): the wrapper the executor uses (mirrors :func:`autoplan.execute.dp.use_ddp`)."""
    if layout.dp == 1:
        return False, False
    ddp = layout.zero == 0 and layout.tp == 1 and layout.pp == 1
    return ddp, not ddp
