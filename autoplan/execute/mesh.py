"""The device mesh of a layout: one object owns it and answers the per-dimension questions.

Dims are named ``("pp", "dp", "cp", "tp")``, outermost to innermost (torchtitan's order), so the
TP group gets adjacent ranks (the fastest links on a real node) and the context-parallel group,
which exchanges keys and values in every attention layer, the next closest. Rank ``r`` sits at::

    pp_rank = r // (dp * cp * tp),   dp_rank = (r // (cp * tp)) % dp,
    cp_rank = (r // tp) % cp,        tp_rank = r % tp

Context-parallel ranks see the same samples (each a share of every sequence) and are data parallel
for the parameter gradients: DDP/FSDP reduce over the ``dp x cp`` ranks, the flattened dim
``dp_cp`` (:meth:`ParallelMesh.grad_mesh`). With ``cp == 1`` the mesh has no ``cp`` dim (3-D, the
same ranks; one process group fewer to create).

Building the mesh creates process groups (a collective step): validate the layout first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

MESH_DIMS = ("pp", "dp", "cp", "tp")
GRAD_DIM = "dp_cp"
"""the flattened ``dp x cp`` dim over which gradients are averaged when ``cp > 1``"""


@dataclass(frozen=True)
class ParallelMesh:
    """The 4-D mesh ``(pp, dp, cp, tp)`` and this rank's coordinates in it."""

    mesh: DeviceMesh
    """the whole mesh, dims named ``pp, dp, cp, tp`` (no ``cp`` when ``cp == 1``)"""
    pp: int
    dp: int
    tp: int
    cp: int = 1
    grad: DeviceMesh | None = None
    """the flattened ``dp_cp`` mesh when ``cp > 1`` (``None`` otherwise)"""

    def get(self, dim: str) -> DeviceMesh:
        """The 1-D sub-mesh of ``dim`` (``"pp"``, ``"dp"``, ``"cp"`` when ``cp > 1``, ``"tp"``) that
        holds this rank."""
        return self.mesh[dim]

    def rank(self, dim: str) -> int:
        """This rank's coordinate along ``dim`` (0 along ``cp`` when ``cp == 1``)."""
        if dim == "cp" and not self.cp_enabled:
            return 0
        return self.mesh.get_local_rank(dim)

    def group(self, dim: str) -> dist.ProcessGroup:
        return self.mesh.get_group(dim)

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def dp_enabled(self) -> bool:
        return self.dp > 1

    @property
    def cp_enabled(self) -> bool:
        return self.cp > 1

    @property
    def grad_enabled(self) -> bool:
        """Whether gradients are averaged over ranks (``dp * cp > 1``)."""
        return self.dp * self.cp > 1

    def grad_mesh(self) -> DeviceMesh:
        """The 1-D mesh gradients are averaged over: ``dp``, or the flattened ``dp_cp`` when ``cp > 1``."""
        return self.grad if self.grad is not None else self.mesh["dp"]

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def device_type(self) -> str:
        return self.mesh.device_type


def build_mesh(device_type: str, *, pp: int, dp: int, tp: int, cp: int = 1) -> ParallelMesh:
    """``init_device_mesh(device_type, (pp, dp, cp, tp))`` with named dims (and ``dp_cp`` flattened
    when ``cp > 1``); needs pp*dp*cp*tp == world."""
    if cp == 1:
        mesh = init_device_mesh(device_type, (pp, dp, tp), mesh_dim_names=tuple(d for d in MESH_DIMS if d != "cp"))
        return ParallelMesh(mesh=mesh, pp=pp, dp=dp, tp=tp)
    mesh = init_device_mesh(device_type, (pp, dp, cp, tp), mesh_dim_names=MESH_DIMS)
    return ParallelMesh(mesh=mesh, pp=pp, dp=dp, tp=tp, cp=cp, grad=mesh["dp", "cp"]._flatten(GRAD_DIM))
