"""How the profiler times a piece of work: a clock per device, a quiet process, medians of samples.

Used by the layer measurements (:mod:`autoplan.profile.layer_figures`) and the link and device
measurements (:mod:`autoplan.profile.links`). Timing is made robust on a small, noisy machine by a
fixed thread count while measuring (:func:`quiet_process`, which also pauses the garbage
collector), warm-up iterations, several samples and their median, and several back-to-back
iterations per sample when one is shorter than ``TimingSettings.min_sample_s``. On CUDA the
device is synchronised and CUDA events time the work.
"""

from __future__ import annotations

import contextlib
import gc
import math
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from autoplan.errors import InputError


@dataclass(frozen=True)
class ProgressEvent:
    """One finished measurement, for a progress bar (``done`` of ``total``)."""

    what: str
    """what was just measured, e.g. ``"block mbs=2 tp=1"``"""
    done: int
    total: int


ProgressCallback = Callable[[ProgressEvent], None]


@dataclass(frozen=True)
class TimingSettings:
    """How one figure is timed."""

    device: torch.device
    warmup: int
    """untimed iterations before the samples"""
    repeats: int
    """timed samples; the figure is their median"""
    min_sample_s: float = 2e-3
    """a sample runs several iterations (and divides) when one is shorter than this"""
    max_inner: int = 64
    """at most this many iterations per sample"""


class Clock:
    """Wall time of a piece of work on ``device`` (CUDA events and a synchronise on GPUs)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    @contextlib.contextmanager
    def measure(self, out: list[float]) -> Iterator[None]:
        """Append the elapsed seconds of the ``with`` body to ``out``."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.sync()
            start.record()
            yield
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            yield
            out.append(time.perf_counter() - t0)


@contextlib.contextmanager
def quiet_process(threads: int | None) -> Iterator[int]:
    """Fix torch's intra-op thread count and pause the garbage collector while measuring;
    both are restored afterwards.  Yields the thread count in force."""
    old_threads = torch.get_num_threads()
    gc_was_enabled = gc.isenabled()
    if threads is not None:
        if threads < 1:
            raise InputError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    gc.collect()
    gc.disable()
    try:
        yield torch.get_num_threads()
    finally:
        if gc_was_enabled:
            gc.enable()
        torch.set_num_threads(old_threads)


def inner_iterations(one_iteration_s: float, settings: TimingSettings) -> int:
    if one_iteration_s <= 0:
        return settings.max_inner
    return max(1, min(settings.max_inner, math.ceil(settings.min_sample_s / one_iteration_s)))


def median_per_call(call: Callable[[], object], inner: int, repeats: int, clock: Clock) -> float:
    """Median over ``repeats`` samples of (time of ``inner`` back-to-back calls) / inner."""
    samples: list[float] = []
    for _ in range(repeats):
        one: list[float] = []
        with clock.measure(one):
            for _ in range(inner):
                call()      # a forward's result is dropped at once: its graph is freed as in training
        samples.append(one[0] / inner)
    return statistics.median(samples)


def device_name(device: torch.device) -> str:
    """A readable name of the device (the CPU model, or the CUDA device name)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def resolve_device(device: str) -> torch.device:
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise InputError(f"bad device {device!r}: {e}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} asked for, but CUDA is not available in this torch")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device {device!r}: only cpu and cuda are supported")
    return dev
