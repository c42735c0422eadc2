"""Peak tensor memory of one training step, measured.

On CUDA this is ``torch.cuda.max_memory_allocated`` (bytes of live tensors, the allocator's own
count). The CPU allocator keeps no such count, so on CPU :class:`LiveTensorTracker` counts it: a
``TorchDispatchMode`` sees every tensor an ATen op takes or returns and keeps the byte size of each
live storage (shared storages counted once, dropped when the last tensor on it dies). Storages
that change size outside ATen (FSDP2 frees unsharded parameters with ``storage.resize_(0)``) are
re-read whenever a tensor on them passes through an op, and all of them every 64 ops. Tensors that
exist before the step (parameters, optimizer state) are counted at entry.

What it does not see: memory that libraries allocate outside ATen (gloo's transport buffers, the
interpreter, the torch libraries), which a process's resident set size does include.
Tracking costs Python work per op, so measure memory on a step that is not timed.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

REFRESH_EVERY_OPS = 64


def _storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    """The storage under a plain tensor (None for meta tensors and tensor subclasses, whose
    inner tensors are seen as they are made)."""
    if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
        return None
    if t.device.type == "meta":
        return None
    return t.untyped_storage()


def _nbytes_and_ptr(st: torch.UntypedStorage) -> tuple[int, int]:
    n = st.nbytes()
    if n == 0:
        return 0, 0
    try:
        return n, st.data_ptr()
    except RuntimeError:      # a storage freed under a live tensor
        return 0, 0


class LiveTensorTracker(TorchDispatchMode):
    """Counts bytes of live tensor storages; ``peak_bytes`` is the most seen at once.

    A storage is counted while any tensor seen on it is alive (autograd keeps the Python objects
    of saved tensors alive with them, so saved activations stay counted until backward frees them).
    """

    def __init__(self, existing: Iterable[torch.Tensor] = ()):
        super().__init__()
        self._storages: dict[int, list] = {}   # data_ptr -> [bytes, live tensors, weakref to one]
        self._tensors: dict[int, weakref.ref] = {}   # id(tensor) -> weakref (already registered)
        self.current_bytes = 0
        self.peak_bytes = 0
        self._ops = 0
        self._pinned = list(existing)           # alive for the whole step
        for t in self._pinned:
            self.track(t)

    def _resize(self, ptr: int, n: int) -> None:
        e = self._storages[ptr]
        self.current_bytes += n - e[0]
        e[0] = n
        self.peak_bytes = max(self.peak_bytes, self.current_bytes)

    def track(self, t: torch.Tensor) -> None:
        """Count ``t``'s storage if new, re-read its size otherwise."""
        st = _storage(t)
        if st is None:
            return
        n, ptr = _nbytes_and_ptr(st)
        if not ptr:
            return
        tid = id(t)
        ref = self._tensors.get(tid)
        if ref is not None and ref() is t:
            if ptr in self._storages and self._storages[ptr][0] != n:
                self._resize(ptr, n)
            return
        self._tensors[tid] = weakref.ref(t)
        if ptr not in self._storages:
            self._storages[ptr] = [0, 0, weakref.ref(t)]
            self._resize(ptr, n)
        elif self._storages[ptr][0] != n:
            self._resize(ptr, n)
        self._storages[ptr][1] += 1
        weakref.finalize(t, self._release, ptr, tid)

    def _release(self, ptr: int, tid: int) -> None:
        self._tensors.pop(tid, None)
        e = self._storages.get(ptr)
        if e is None:
            return
        e[1] -= 1
        if e[1] == 0:
            self.current_bytes -= e[0]
            del self._storages[ptr]

    def refresh(self) -> None:
        """Re-read every tracked storage's size (catches resizes done outside ATen)."""
        for ptr, e in list(self._storages.items()):
            t = e[2]()
            if t is None:
                continue
            st = _storage(t)
            n = _nbytes_and_ptr(st)[0] if st is not None else 0
            if n != e[0]:
                self._resize(ptr, n)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for t in tree_flatten((args, kwargs))[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        self._ops += 1
        if self._ops % REFRESH_EVERY_OPS == 0:
            self.refresh()
        return out


def state_tensors(params: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer | None) -> list[torch.Tensor]:
    """Plain tensors holding parameters, gradients and optimizer state (DTensors unwrapped)."""
    out: list[torch.Tensor] = []

    def add(t) -> None:
        if isinstance(t, torch.Tensor):
            out.append(t._local_tensor if hasattr(t, "_local_tensor") else t)

    for p in params:
        add(p)
        if p.grad is not None:
            add(p.grad)
    if optimizer is not None:
        for st in optimizer.state.values():
            for v in st.values():
                add(v)
    return out
