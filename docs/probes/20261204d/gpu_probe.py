"""Second GPU call of 2026-12-04 (H200, after benchmarks/gpu_check.sh): why fp8 ran 0.30x of bf16 and
whether full recompute at micro-batch 1 really costs 2.2x.

    python docs/probes/20261204d/gpu_probe.py --out $OUT            # on the GPU
    python docs/probes/20261204d/gpu_probe.py --device cpu --model gpt-tiny --dtype float32 --out /tmp/p  # dry run

Parts, each timed under the overall deadline and written to probe.json as it finishes:
  fp8_eager      one gpt3-1.3b block, forward + backward, bf16 vs torchao float8 (tensorwise, rowwise)
  fp8_profile    torch.profiler of the eager fp8 block: the top ops by device and by host time
  compiled       torch.compile(block) in bf16 and in fp8 (tensorwise)
  recompute      a chain of the model's blocks (as a step runs them, one sync at the end) at mbs 1 and 2,
                 recompute none / full / selective (autoplan.models.recompute.wrap_block)
"""

from __future__ import annotations

import argparse
import copy
import json
import time
import traceback
from pathlib import Path

import torch

from autoplan.models.recompute import wrap_block
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.models.transformer import Block


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt3-1.3b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=230.0)
    ap.add_argument("--chain-blocks", type=int, default=24)
    ap.add_argument("--parts", default="fp8_eager,fp8_profile,recompute,compiled")
    a = ap.parse_args()
    t_start = time.perf_counter()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    shape = BUILTIN_SHAPES[a.model]
    res: dict = {"model": a.model, "device": str(dev), "torch": torch.__version__}

    def left() -> float:
        return a.deadline_s - (time.perf_counter() - t_start)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def save() -> None:
        (out_dir / "probe.json").write_text(json.dumps(res, indent=1))

    def timed(fn, repeats: int = 10, warm: int = 3) -> float:
        for _ in range(warm):
            fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        return (time.perf_counter() - t0) / repeats

    def part(name, fn, need_s: float) -> None:
        if left() < need_s:
            res[name] = {"skipped": f"{left():.0f} s left"}
            save()
            return
        t0 = time.perf_counter()
        try:
            res[name] = fn()
        except Exception as e:  # a probe: record and go on
            res[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
        res[name + "_wall_s"] = time.perf_counter() - t0
        print(name, json.dumps(res[name])[:600], flush=True)
        save()

    torch.manual_seed(0)
    block = Block(shape).to(dev, dtype)
    mbs = 4

    def x_of(b: int) -> torch.Tensor:
        return torch.randn(b, shape.seq_len, shape.hidden, device=dev, dtype=dtype, requires_grad=True)
    x = x_of(mbs)

    def step_of(m, inp):
        return lambda: m(inp).float().pow(2).mean().backward()

    fp8_ok = dev.type == "cuda"
    converted = {}

    def fp8_eager() -> dict:
        r = {"mbs": mbs, "bf16_s": timed(step_of(block, x))}
        if not fp8_ok:
            return r
        from autoplan.execute.fp8 import convert_to_fp8
        for recipe, rowwise in (("tensorwise", False), ("rowwise", True)):
            m = convert_to_fp8(copy.deepcopy(block), rowwise=rowwise)
            converted[recipe] = m
            r[f"fp8_{recipe}_s"] = timed(step_of(m, x))
        # a bigger micro-batch: does the gap shrink as GEMMs grow (a per-op overhead) or not
        x8 = x_of(8)
        r["bf16_mbs8_s"] = timed(step_of(block, x8), repeats=5)
        if "tensorwise" in converted:
            r["fp8_tensorwise_mbs8_s"] = timed(step_of(converted["tensorwise"], x8), repeats=5)
        return r

    key_dev = "self_device_time_total" if dev.type == "cuda" else "self_cpu_time_total"

    def profiled(fn, warm: int):
        """torch.profiler's key averages of one call of ``fn`` after ``warm``, and its wall time"""
        for _ in range(warm):
            fn()
        sync()
        acts = [torch.profiler.ProfilerActivity.CPU]
        if dev.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        t0 = time.perf_counter()
        with torch.profiler.profile(activities=acts) as prof:
            fn()
            sync()
        return prof.key_averages(), time.perf_counter() - t0

    def fp8_profile() -> dict:
        ka, _ = profiled(step_of(converted.get("tensorwise", block), x), warm=2)
        rows = sorted(ka, key=lambda e: getattr(e, key_dev, 0.0), reverse=True)[:20]
        top_dev = [(e.key, e.count, round(getattr(e, key_dev, 0.0) / 1e3, 3)) for e in rows]
        rows_cpu = sorted(ka, key=lambda e: e.self_cpu_time_total, reverse=True)[:20]
        top_cpu = [(e.key, e.count, round(e.self_cpu_time_total / 1e3, 3)) for e in rows_cpu]
        (out_dir / "fp8_profile.txt").write_text(
            ka.table(sort_by=key_dev, row_limit=40) + "\n\n" + ka.table(sort_by="self_cpu_time_total", row_limit=40))
        return {"top_device_ms": top_dev, "top_host_ms": top_cpu,
                "device_total_ms": round(sum(getattr(e, key_dev, 0.0) for e in ka) / 1e3, 3),
                "host_total_ms": round(sum(e.self_cpu_time_total for e in ka) / 1e3, 3)}

    def compiled() -> dict:
        r = {"mbs": mbs}
        t0 = time.perf_counter()
        cb = torch.compile(copy.deepcopy(block))
        step_of(cb, x)()
        sync()
        r["bf16_compile_s"] = time.perf_counter() - t0
        r["bf16_compiled_s"] = timed(step_of(cb, x))
        if fp8_ok and left() > 60:
            from autoplan.execute.fp8 import convert_to_fp8
            t0 = time.perf_counter()
            cf = torch.compile(convert_to_fp8(copy.deepcopy(block)))
            step_of(cf, x)()
            sync()
            r["fp8_compile_s"] = time.perf_counter() - t0
            r["fp8_compiled_s"] = timed(step_of(cf, x))
        return r

    def recompute() -> dict:
        r: dict = {"blocks": a.chain_blocks}
        chain_base = [Block(shape).to(dev, dtype) for _ in range(a.chain_blocks)]
        for b in (1, 2):
            xb = x_of(b)
            for mode in ("none", "full", "selective"):
                if left() < 15:
                    r[f"mbs{b}_{mode}"] = "skipped"
                    continue
                chain = torch.nn.Sequential(*[wrap_block(blk, mode) for blk in chain_base])
                r[f"mbs{b}_{mode}_s"] = timed(step_of(chain, xb), repeats=5, warm=2)
                for p in chain.parameters():
                    p.grad = None
        return r

    def recompute_profile() -> dict:
        """the chain at mbs 1 under full recompute, profiled: where do its extra milliseconds go"""
        r: dict = {}
        chain_base = [Block(shape).to(dev, dtype) for _ in range(a.chain_blocks)]
        xb = x_of(1)
        for mode in ("none", "full"):
            chain = torch.nn.Sequential(*[wrap_block(blk, mode) for blk in chain_base])
            ka, r[f"{mode}_profiled_s"] = profiled(step_of(chain, xb), warm=3)
            r[f"{mode}_device_total_ms"] = round(sum(getattr(e, key_dev, 0.0) for e in ka) / 1e3, 3)
            r[f"{mode}_top_device_ms"] = [(e.key[:80], e.count, round(getattr(e, key_dev, 0.0) / 1e3, 3)) for e in
                                          sorted(ka, key=lambda e: getattr(e, key_dev, 0.0), reverse=True)[:12]]
            (out_dir / f"recompute_{mode}_profile.txt").write_text(ka.table(sort_by=key_dev, row_limit=30))
            for p_ in chain.parameters():
                p_.grad = None
        return r

    parts = {"fp8_eager": (fp8_eager, 20), "fp8_profile": (fp8_profile, 15), "recompute": (recompute, 30),
             "compiled": (compiled, 45), "recompute_profile": (recompute_profile, 20)}
    for name in a.parts.split(","):
        fn, need = parts[name]
        part(name, fn, need)
    res["wall_s"] = time.perf_counter() - t_start
    save()
    print("done in", round(res["wall_s"], 1), "s", flush=True)


if __name__ == "__main__":
    main()
