"""Loss scaling for fp16 mixed precision, across every wrapper the executor uses.

fp16 has 5 exponent bits: small gradients underflow to zero in its backward. The loss is multiplied
by a scale before backward, the fp32 gradients are divided by it before the optimizer step, and a
step whose gradients hold an inf or NaN is skipped and the scale halved (doubled again after
``growth_interval`` clean steps): ``torch.amp.GradScaler``'s dynamic scaling.

:class:`LossScaler` is FSDP's ``ShardedGradScaler`` (whose ``unscale_`` all-reduces the
found-inf flag over the whole job, so every rank skips the same steps: under PP, TP and FSDP each
rank holds different gradients) with one change: DTensor gradients (TP shards, FSDP2 shards,
replicated norms) are unscaled through their local tensors. torch's own path hands DTensor and
plain gradients together to ``_amp_foreach_non_finite_check_and_unscale_``, which DTensor refuses
("got mixed torch.Tensor and DTensor", torch 2.13), and the plain ``GradScaler`` syncs nothing.
::

    scaler = LossScaler(device)
    scaler.scale(loss).backward()       # inside Parallelized.step
    scaler.step(opt); scaler.update()   # Parallelized.optimizer_step(opt)
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler, _GeneralMultiDeviceReplicator
from torch.distributed.tensor import DTensor

INIT_SCALE = 2.0 ** 16
"""torch.amp.GradScaler's default initial scale"""


class LossScaler(ShardedGradScaler):
    """Dynamic loss scaling whose inf/NaN check covers every rank and DTensor gradients."""

    def __init__(self, device: torch.device, *, init_scale: float = INIT_SCALE, growth_interval: int = 2000) -> None:
        super().__init__(device.type, init_scale=init_scale, growth_interval=growth_interval)
        # now, not at the first scale(): a pipeline stage without the loss never calls scale()
        # but joins unscale_'s all-reduce
        self._lazy_init_scale_growth_tracker(device)

    def _unscale_grads_(self, optimizer: torch.optim.Optimizer, inv_scale: torch.Tensor, found_inf: torch.Tensor,
                        allow_fp16: bool = True) -> dict[torch.device, torch.Tensor]:
        """Divide every gradient by the scale in place and flag infs/NaNs (per device); DTensor
        gradients through their local shard. The all-reduce of the flags is the caller's
        (``ShardedGradScaler.unscale_``)."""
        per_device_inv_scale = _GeneralMultiDeviceReplicator(inv_scale)
        per_device_found_inf = _GeneralMultiDeviceReplicator(found_inf)
        grads: dict[torch.device, dict[torch.dtype, list[torch.Tensor]]] = defaultdict(lambda: defaultdict(list))
        with torch.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    g = param.grad
                    if g is None:
                        continue
                    local = g._local_tensor if isinstance(g, DTensor) else g
                    if local.is_sparse:
                        raise ValueError("LossScaler: sparse gradients are not supported")
                    grads[local.device][local.dtype].append(local)
            for device, by_dtype in grads.items():
                for tensors in by_dtype.values():
                    torch._amp_foreach_non_finite_check_and_unscale_(
                        tensors, per_device_found_inf.get(device), per_device_inv_scale.get(device))
        if not per_device_found_inf._per_device_tensors:      # no gradients here: still join the all-reduce
            per_device_found_inf.get(self._scale.device)
        return per_device_found_inf._per_device_tensors
