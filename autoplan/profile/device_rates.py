"""One device's rates, measured: dense matmul FLOPs per second (alone and over a fixed window, for
all devices computing at once) and memory copy bandwidth.

Used by the cluster profiles (:mod:`autoplan.profile.links`, :mod:`autoplan.profile.link_bench`).
Times are ``time.perf_counter`` around the work, with a CUDA synchronise on GPUs; fp32 on CPU,
bf16 on CUDA.
"""

from __future__ import annotations

import statistics
import time

import torch


def sync_device(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_compute_flops_per_s(n: int, device: torch.device, repeats: int = 5) -> float:
    """Dense matmul rate: 2*n^3 FLOPs over the median time of an n x n x n product
    (fp32 on CPU, bf16 on CUDA)."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    samples = []
    for i in range(repeats + 1):
        sync_device(device)
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync_device(device)
        if i:
            samples.append(time.perf_counter() - t0)
    return 2.0 * n ** 3 / statistics.median(samples)


def measure_compute_flops_per_s_for(duration_s: float, n: int, device: torch.device) -> float:
    """Dense matmul rate over a fixed wall-clock window: products run back to back for
    ``duration_s`` and the FLOPs done are divided by the time taken. Started on every rank at once
    (after a barrier), every rank's window overlaps the others', so the rate is what a device gets
    while all devices compute."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    torch.mm(a, b)
    sync_device(device)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < duration_s:
        torch.mm(a, b)
        sync_device(device)
        done += 1
    return 2.0 * n ** 3 * done / (time.perf_counter() - t0)


def measure_memory_bandwidth_bytes_per_s(nbytes: int, device: torch.device, repeats: int = 5) -> float:
    """Copy bandwidth: bytes read plus bytes written (2 * nbytes) over the median time of one
    tensor copy."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    samples = []
    for i in range(repeats + 1):
        sync_device(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync_device(device)
        if i:
            samples.append(time.perf_counter() - t0)
    return 2.0 * src.numel() * 4 / statistics.median(samples)
