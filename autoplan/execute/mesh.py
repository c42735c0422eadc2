"""The device mesh of a layout: one object owns it and answers the per-dimension questions.

Dims are named ``("pp", "dp", "tp")``, outermost to innermost, so the TP group gets adjacent
ranks (the fastest links on a real node). Rank ``r`` sits at::

    pp_rank = r // (dp * tp),   dp_rank = (r // tp) % dp,   tp_rank = r % tp

Building the mesh creates process groups (a collective step): validate the layout first.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

MESH_DIMS = ("pp", "dp", "tp")


@dataclass(frozen=True)
class ParallelMesh:
    """The 3-D mesh ``(pp, dp, tp)`` and this rank's coordinates in it."""

    mesh: DeviceMesh
    """the whole mesh, dims named ``pp, dp, tp``"""
    pp: int
    dp: int
    tp: int

    def get(self, dim: str) -> DeviceMesh:
        """The 1-D sub-mesh of ``dim`` (``"pp"``, ``"dp"`` or ``"tp"``) that holds this rank."""
        return self.mesh[dim]

    def rank(self, dim: str) -> int:
        """This rank's coordinate along ``dim``."""
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
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def device_type(self) -> str:
        return self.mesh.device_type


def build_mesh(device_type: str, *, pp: int, dp: int, tp: int) -> ParallelMesh:
    """``init_device_mesh(device_type, (pp, dp, tp))`` with named dims; needs pp*dp*tp == world."""
    mesh = init_device_mesh(device_type, (pp, dp, tp), mesh_dim_names=MESH_DIMS)
    return ParallelMesh(mesh=mesh, pp=pp, dp=dp, tp=tp)
