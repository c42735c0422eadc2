"""Apply a plan with torch.distributed: :func:`autoplan.execute.apply.parallelize` (also
``autoplan.parallelize``), one module per concern (mesh, pp, tp, recompute, dp), deterministic
synthetic data (:mod:`~autoplan.execute.data`) and the torchrun launcher (:mod:`~autoplan.execute.launch`).
Import the submodules directly; importing this package does not import torch.distributed."""
