"""Helpers of ``benchmarks/gpu_check.sh``: the environment record and the final report.

    python benchmarks/gpu_check.py env --device cuda --out WORK/env.json
    python benchmarks/gpu_check.py validate --model M --cluster C --global-batch 8 --top-k 4 --out WORK/validate.json
    python benchmarks/gpu_check.py report --work WORK --out OUT [--catalogue dgx-h200-141gb:1]

``report`` reads what the stages of the shell script left in WORK (any of them may be missing: a
failed stage is reported, the others still are) and writes ``gpu_check.json`` and
``gpu_check.md`` into OUT, then prints a summary:

- layer by layer (kind, TP shard degree, micro-batch size): the measured bf16 profile against the
  analytic profile of the catalogue GPU (forward and backward time, saved-activation bytes) and the
  achieved TFLOP/s (forward FLOPs x 3 for forward + backward, over the measured time);
- the one-device cluster profile (matmul rate, copy bandwidth, memory);
- the plan, and ``validate``'s predicted against measured step time and peak memory
  (``torch.cuda.max_memory_allocated`` on CUDA) of the top layouts;
- the 5 training steps of ``autoplan run``;
- the acceptance checks of issue 10: measured step time within 15% of the prediction, memory within
  10%, analytic per-layer time within 25% of measured.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

STEP_TIME_TOL = 0.15
MEMORY_TOL = 0.10
ANALYTIC_LAYER_TOL = 0.25
MIB = 2 ** 20


# --------------------------------------------------------------------------------------------
# env
# --------------------------------------------------------------------------------------------

def environment(device: str) -> dict:
    """Versions and the device, as this process sees them."""
    import torch

    env = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
           "torch": torch.__version__, "cuda_runtime": torch.version.cuda, "device": device,
           "cuda_available": torch.cuda.is_available(), "host": platform.node()}
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_bytes=props.total_memory,
                   compute_capability=f"{props.major}.{props.minor}", multiprocessors=props.multi_processor_count)
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            env["nvidia_smi"] = smi.stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            env["nvidia_smi"] = f"unavailable: {e}"
    try:
        import pulp
        env["pulp"] = pulp.__version__ if hasattr(pulp, "__version__") else "present"
    except ImportError:
        env["pulp"] = "MISSING"
    return env


# --------------------------------------------------------------------------------------------
# validate, one layout at a time
# --------------------------------------------------------------------------------------------

FP8_SHAPES = "gpt3-1.3b:4,gpt3-6.7b:2,llama3-8b:1"
"""the fp8 stage's blocks, ``model:mbs`` (about 8K tokens each)"""


def fp8_block(model: str, device: str, mbs: int = 4, repeats: int = 5, *, compiled: bool = True) -> dict:
    """One transformer block of ``model`` (the built-in reference), forward + backward in bf16 and with
    its linear layers in fp8 (:func:`autoplan.execute.fp8.convert_to_fp8`, torchao, tensorwise and
    rowwise scaling), eager and under ``torch.compile`` (torchao's float8 is written for compile: eager,
    each cast and scale is its own kernel), measured beside the analytic model's speed-up for the
    catalogue GPU; where fp8 cannot run, the refusal it gives."""
    import copy
    import time

    import torch

    from autoplan.execute.fp8 import convert_to_fp8, fp8_refusal
    from autoplan.models.shapes import BUILTIN_SHAPES
    from autoplan.models.transformer import Block
    dev = torch.device(device)
    out: dict = {"model": model, "mbs": mbs}
    why = fp8_refusal(dev, tp=1)
    if why:
        out["refused"] = why
        return out
    shape = BUILTIN_SHAPES[model]
    block = Block(shape).to(dev, torch.bfloat16)
    x = torch.randn(mbs, shape.seq_len, shape.hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def timed(name: str, m) -> None:
        """``out[name + "_s"]``: the mean of ``repeats`` steps after three; ``out[name + "_first_s"]``: the
        first (where compiled, the compilation)"""
        t0 = time.perf_counter()
        m(x).float().pow(2).mean().backward()
        torch.cuda.synchronize(dev)
        out[name + "_first_s"] = time.perf_counter() - t0
        for _ in range(2):
            m(x).float().pow(2).mean().backward()
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(repeats):
            m(x).float().pow(2).mean().backward()
        torch.cuda.synchronize(dev)
        out[name + "_s"] = (time.perf_counter() - t0) / repeats
    timed("bf16", block)
    timed("fp8", convert_to_fp8(copy.deepcopy(block)))
    out["measured_speedup"] = out["bf16_s"] / out["fp8_s"]
    if compiled:
        timed("bf16_compiled", torch.compile(copy.deepcopy(block)))
        timed("fp8_compiled", torch.compile(convert_to_fp8(copy.deepcopy(block))))
        timed("fp8_rowwise_compiled", torch.compile(convert_to_fp8(copy.deepcopy(block), rowwise=True)))
        out["compiled_speedup"] = out["bf16_compiled_s"] / out["fp8_compiled_s"]
    from autoplan.profile.analytic import DeviceModel, block_time, fp8_device_model
    from autoplan.profile.assumptions import STACKS
    from autoplan.profile.hardware import catalogue_cluster
    dm = DeviceModel.of(catalogue_cluster("dgx-h200-141gb:1"), "bf16")
    stack = STACKS["autoplan"]
    bf = block_time(shape, shape.seq_len, mbs, 1, dm, stack, 2)
    f8 = block_time(shape, shape.seq_len, mbs, 1, dm, stack, 2, fp8=fp8_device_model(dm, stack))
    out["analytic_bf16_s"] = bf.forward_s + bf.backward_s
    out["analytic_fp8_s"] = f8.forward_s + f8.backward_s
    out["analytic_speedup"] = out["analytic_bf16_s"] / out["analytic_fp8_s"]
    return out


def fp8_blocks(spec: str, device: str, out: Path, time_left_s: float) -> list[dict]:
    """:func:`fp8_block` for each ``model:mbs`` of ``spec``, the JSON rewritten after each; a block
    is started only with more than 40 s left."""
    import time
    t0 = time.perf_counter()
    rows: list[dict] = []
    for item in spec.split(","):
        model, _, mbs = item.partition(":")
        if rows and time_left_s - (time.perf_counter() - t0) < 40:
            rows.append({"model": model, "mbs": int(mbs or 1), "error": "skipped: no time left"})
        else:
            try:
                rows.append(fp8_block(model, device, int(mbs or 1)))
            except Exception as e:  # noqa: BLE001  (one block's failure is its row; the others still run)
                rows.append({"model": model, "mbs": int(mbs or 1), "error": f"{type(e).__name__}: {e}"})
        out.write_text(json.dumps(rows, indent=2))
        if "refused" in rows[-1]:
            break
    return rows


def validate_incrementally(model: str, cluster: str, global_batch: int, *, top_k: int, steps: int, warmup: int,
                           out: Path, time_left_s: float) -> None:
    """``autoplan validate --json`` with the same library calls, but the JSON is rewritten after
    each layout and no layout starts without ``MIN_RUN_S`` left of ``time_left_s``: a slow layout
    costs its own figure, not those measured before it."""
    import subprocess
    import tempfile
    import time

    from autoplan.errors import AutoplanError
    from autoplan.plan.api import make_problem
    from autoplan.validate import Run, candidate_layouts, measure_layout

    deadline = time.monotonic() + time_left_s
    pb = make_problem(model, cluster, global_batch)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-validate-") as tmp:
        for lay, pred in candidate_layouts(pb, top_k=top_k, all_layouts=False):
            left = deadline - time.monotonic()
            print(f"[{len(runs) + 1}/{top_k}] {lay.short()} ({left:.0f} s left)", file=sys.stderr, flush=True)
            if left < MIN_RUN_S:
                runs.append(Run(lay, pred, None, error=f"skipped: {left:.0f} s left"))
            else:
                try:
                    runs.append(Run(lay, pred, measure_layout(pb, lay, pred, steps=steps, warmup=warmup,
                                                              workdir=Path(tmp), timeout_s=left)))
                except (AutoplanError, subprocess.TimeoutExpired) as e:
                    runs.append(Run(lay, pred, None, error=str(e).splitlines()[0]))
            out.write_text(json.dumps({"runs": [r.to_dict() for r in runs], "chosen": 0}, indent=2))


MIN_RUN_S = 20.0
"""a validate run is not started with less time left (model build, launch, a few steps)"""


# --------------------------------------------------------------------------------------------
# the comparisons (pure functions of the artifacts)
# --------------------------------------------------------------------------------------------

def layer_rows(measured, analytic) -> list[dict]:
    """One row per measured (kind, tp, mbs): measured against analytic times and saved bytes."""
    rows = []
    for kind, mk in measured.kinds.items():
        ak = analytic.kinds.get(kind)
        for t in sorted(mk.timings, key=lambda t: (t.tp, t.mbs)):
            flops = mk.flops_per_sample * t.mbs / (t.tp if mk.tp_shardable else 1)
            measured_s = t.forward_s + t.backward_s
            row = {"kind": kind, "tp": t.tp, "mbs": t.mbs,
                   "forward_s": t.forward_s, "backward_s": t.backward_s,
                   "saved_activation_bytes": t.saved_activation_bytes,
                   "achieved_tflops": 3 * flops / measured_s / 1e12 if measured_s > 0 and flops > 0 else None}
            if ak is not None:
                a = ak.timing(t.mbs, t.tp)
                analytic_s = a.forward_s + a.backward_s
                row.update(analytic_forward_s=a.forward_s, analytic_backward_s=a.backward_s,
                           analytic_saved_activation_bytes=a.saved_activation_bytes,
                           time_ratio=analytic_s / measured_s if measured_s > 0 else None,
                           saved_ratio=(a.saved_activation_bytes / t.saved_activation_bytes
                                        if t.saved_activation_bytes else None))
            rows.append(row)
    return rows


def validate_rows(validate_json: dict) -> list[dict]:
    """Predicted against measured step time and memory of each validated layout."""
    rows = []
    for i, r in enumerate(validate_json.get("runs", [])):
        from autoplan.plan.plan import Layout
        pred, meas = r["predicted"], r.get("measured")
        row = {"chosen": i == validate_json.get("chosen", 0), "layout": Layout.from_dict(r["layout"]).short(),
               "predicted_step_s": pred["step_time_s"], "predicted_peak_memory_bytes": pred["peak_memory_bytes"],
               "error": r.get("error", "")}
        if meas:
            row.update(measured_step_s=meas["step_time_s"], measured_peak_memory_bytes=meas["peak_memory_bytes"],
                       step_time_err=(pred["step_time_s"] - meas["step_time_s"]) / meas["step_time_s"],
                       memory_err=((pred["peak_memory_bytes"] - meas["peak_memory_bytes"])
                                   / meas["peak_memory_bytes"]) if meas["peak_memory_bytes"] else None)
        rows.append(row)
    return rows


def run_steps(text: str) -> dict:
    """The ``step n loss x time_s t`` lines and the summary lines of ``examples/train_gpt.py``."""
    steps, out = [], {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] == "step" and parts[2] == "loss" and parts[4] == "time_s":
            steps.append({"step": int(parts[1]), "loss": float(parts[3]), "time_s": float(parts[5])})
        elif len(parts) == 2 and parts[0] in ("peak_memory_bytes", "median_step_time_s"):
            out[parts[0]] = float(parts[1])
    out["steps"] = steps
    return out


def checks(layers: list[dict], runs: list[dict]) -> dict:
    """Issue 10's acceptance figures: worst relative error of each, and whether it is within tolerance."""
    def verdict(errs: list[float], tol: float) -> dict:
        if not errs:
            return {"n": 0, "worst_abs_err": None, "pass": None}
        worst = max(abs(e) for e in errs)
        return {"n": len(errs), "worst_abs_err": worst, "pass": worst <= tol, "tolerance": tol}
    ok = [r for r in runs if "measured_step_s" in r]
    return {
        "step_time_within_15pct": verdict([r["step_time_err"] for r in ok], STEP_TIME_TOL),
        "memory_within_10pct": verdict([r["memory_err"] for r in ok if r.get("memory_err") is not None], MEMORY_TOL),
        "analytic_layer_time_within_25pct": verdict(
            [r["time_ratio"] - 1 for r in layers if r.get("time_ratio") is not None and r["kind"] != "embed"],
            ANALYTIC_LAYER_TOL),
    }


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def _read_json(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def _section(report: dict, name: str, fn) -> None:
    """``report[name] = fn()``; a failure becomes ``{"error": ...}`` so the other sections survive."""
    try:
        report[name] = fn()
    except Exception as e:  # noqa: BLE001  -- recorded in the report, not swallowed
        report[name] = {"error": f"{type(e).__name__}: {e}"}


def build_report(work: Path, catalogue: str) -> dict:
    from autoplan.profile.analytic import analytic_model_profile
    from autoplan.profile.formats import ClusterProfile, ModelProfile
    from autoplan.profile.hardware import catalogue_cluster
    from autoplan.models.shapes import ModelShape

    report: dict = {"environment": _read_json(work / "env.json") or {},
                    "settings": _read_json(work / "settings.json") or {}, "stages": []}
    status = work / "status.tsv"
    if status.is_file():
        for line in status.read_text().splitlines():
            name, rc, wall, *rest = line.split("\t") + [""]
            report["stages"].append({"name": name, "rc": rc, "wall_s": float(wall or 0),
                                     "error": rest[0] if rc != "0" else ""})

    def layers() -> dict:
        measured = ModelProfile.load(work / "model.json")
        shape = ModelShape.from_dict(measured.shape)
        tps = sorted({t.tp for k in measured.kinds.values() for t in k.timings})
        mbs = sorted({t.mbs for k in measured.kinds.values() for t in k.timings})
        cl = catalogue_cluster(catalogue)
        analytic = analytic_model_profile(shape, cl, precision=measured.precision, mbs_list=tuple(mbs),
                                          tp_list=tuple(tps), seq_len=measured.seq_len)
        return {"catalogue": catalogue, "catalogue_compute_flops_per_s": cl.device.compute_flops_per_s,
                "precision": measured.precision, "environment": measured.environment,
                "rows": layer_rows(measured, analytic)}
    _section(report, "layers", layers)

    def cluster() -> dict:
        cl = ClusterProfile.load(work / "cluster.json")
        return {"device": cl.device.name, "type": cl.device.type, "world_size": cl.world_size,
                "compute_flops_per_s": cl.device.compute_flops_per_s,
                "memory_bandwidth_bytes_per_s": cl.device.memory_bandwidth_bytes_per_s,
                "memory_bytes": cl.device.memory_bytes}
    _section(report, "cluster", cluster)

    def plan() -> dict:
        from autoplan.plan.plan import Plan
        p = Plan.load(work / "plan.json")
        return {"layout": p.layout.short(), "predicted_step_s": p.predicted.step_time_s,
                "predicted_peak_memory_bytes": p.predicted.peak_memory_bytes, "breakdown_s": p.predicted.breakdown_s}
    _section(report, "plan", plan)

    def validate() -> list[dict]:
        d = _read_json(work / "validate.json")
        if d is None:
            raise FileNotFoundError("validate wrote no JSON (see its stage)")
        return validate_rows(d)
    _section(report, "validate", validate)

    def run() -> dict:
        f = work / "run.out"
        if not f.is_file():
            raise FileNotFoundError("no output of autoplan run")
        return run_steps(f.read_text())
    _section(report, "run", run)

    def fp8() -> dict:
        d = _read_json(work / "fp8.json")
        if d is None:
            raise FileNotFoundError("the fp8 stage wrote no JSON (see its stage)")
        return d
    _section(report, "fp8", fp8)

    layer_list = report["layers"].get("rows", []) if isinstance(report["layers"], dict) else []
    run_list = report["validate"] if isinstance(report["validate"], list) else []
    report["checks"] = checks(layer_list, run_list)
    return report


def _f(x, fmt: str, scale: float = 1.0) -> str:
    return "-" if x is None else format(x * scale, fmt)


def markdown(report: dict) -> str:
    env, st = report["environment"], report["settings"]
    lines = ["# GPU check", "",
             f"{env.get('gpu') or env.get('device', '?')}, torch {env.get('torch', '?')} "
             f"(CUDA {env.get('cuda_runtime')}), {env.get('date', '?')}; model {st.get('model', '?')} "
             f"in {st.get('precision', '?')}, global batch {st.get('global_batch', '?')}, "
             f"budget {st.get('memory_per_device', '?')}", "",
             "## Stages", "", "| stage | exit | wall s | error |", "|---|---|---|---|"]
    lines += [f"| {s['name']} | {s['rc']} | {s['wall_s']:.1f} | {s['error']} |" for s in report["stages"]]
    lay = report.get("layers", {})
    lines += ["", f"## Layers: measured vs analytic ({lay.get('catalogue', '?')})", ""]
    if "rows" in lay:
        lines += ["| kind | tp | mbs | fwd ms | bwd ms | analytic fwd+bwd ms | analytic/measured | saved MiB | "
                  "analytic saved MiB | TFLOP/s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in lay["rows"]:
            an = (r.get("analytic_forward_s") or 0) + (r.get("analytic_backward_s") or 0) if "analytic_forward_s" in r else None
            lines.append(f"| {r['kind']} | {r['tp']} | {r['mbs']} | {_f(r['forward_s'], '.3f', 1e3)} | "
                         f"{_f(r['backward_s'], '.3f', 1e3)} | {_f(an, '.3f', 1e3)} | {_f(r.get('time_ratio'), '.2f')} | "
                         f"{_f(r['saved_activation_bytes'], '.1f', 1 / MIB)} | "
                         f"{_f(r.get('analytic_saved_activation_bytes'), '.1f', 1 / MIB)} | {_f(r['achieved_tflops'], '.1f')} |")
    else:
        lines.append(f"not available: {lay.get('error')}")
    cl = report.get("cluster", {})
    lines += ["", "## One-device cluster", ""]
    lines.append(f"{cl.get('device')}: matmul {_f(cl.get('compute_flops_per_s'), '.1f', 1e-12)} TFLOP/s, copy "
                 f"{_f(cl.get('memory_bandwidth_bytes_per_s'), '.0f', 1e-9)} GB/s, budget "
                 f"{_f(cl.get('memory_bytes'), '.0f', 1 / MIB)} MiB" if "error" not in cl else f"not available: {cl['error']}")
    pl = report.get("plan", {})
    lines += ["", "## Validate: predicted vs measured", ""]
    if "error" not in pl:
        lines.append(f"plan: `{pl.get('layout')}`, predicted {_f(pl.get('predicted_step_s'), '.3f')} s, "
                     f"{_f(pl.get('predicted_peak_memory_bytes'), '.0f', 1 / MIB)} MiB")
        lines.append("")
    v = report.get("validate")
    if isinstance(v, list):
        lines += ["| layout | pred s | meas s | err | pred MiB | meas MiB | err |", "|---|---|---|---|---|---|---|"]
        for r in v:
            mark = " (chosen)" if r["chosen"] else ""
            if "measured_step_s" not in r:
                lines.append(f"| `{r['layout']}`{mark} | {r['predicted_step_s']:.3f} | failed: {r['error']} | | | | |")
                continue
            lines.append(f"| `{r['layout']}`{mark} | {r['predicted_step_s']:.3f} | {r['measured_step_s']:.3f} | "
                         f"{r['step_time_err'] * 100:+.1f}% | {r['predicted_peak_memory_bytes'] / MIB:.0f} | "
                         f"{r['measured_peak_memory_bytes'] / MIB:.0f} | {_f(r['memory_err'], '+.1f', 100)}% |")
    else:
        lines.append(f"not available: {(v or {}).get('error')}")
    rn = report.get("run", {})
    lines += ["", "## autoplan run (examples/train_gpt.py)", ""]
    if "steps" in rn:
        lines += [f"step {s['step']}: loss {s['loss']:.4f}, {s['time_s']:.3f} s" for s in rn["steps"]]
        lines.append(f"median step {_f(rn.get('median_step_time_s'), '.4f')} s, peak memory "
                     f"{_f(rn.get('peak_memory_bytes'), '.0f', 1 / MIB)} MiB")
    else:
        lines.append(f"not available: {rn.get('error')}")
    f8 = report.get("fp8", [])
    lines += ["", "## fp8: one block, torchao float8 linears against bf16, forward + backward", ""]
    rows = f8 if isinstance(f8, list) else [f8]
    if rows and all("measured_speedup" in r for r in rows):
        lines += ["| block | mbs | bf16 ms | fp8 ms | speed-up | compiled: bf16 ms | fp8 ms | fp8 rowwise ms | speed-up "
                  "| analytic speed-up |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['model']} | {r['mbs']} | {_f(r['bf16_s'], '.2f', 1e3)} | {_f(r['fp8_s'], '.2f', 1e3)} "
                         f"| {_f(r['measured_speedup'], '.2f')}x | {_f(r.get('bf16_compiled_s'), '.2f', 1e3)} "
                         f"| {_f(r.get('fp8_compiled_s'), '.2f', 1e3)} | {_f(r.get('fp8_rowwise_compiled_s'), '.2f', 1e3)} "
                         f"| {_f(r.get('compiled_speedup'), '.2f')}x | {_f(r['analytic_speedup'], '.2f')}x |")
    for r in rows:
        if "measured_speedup" not in r:
            lines.append(f"{r.get('model', '')}: not run: {r.get('refused') or r.get('error')}")
    lines += ["", "## Checks (issue 10)", "", "| check | n | worst abs err | tolerance | pass |", "|---|---|---|---|---|"]
    for name, c in report["checks"].items():
        lines.append(f"| {name} | {c['n']} | {_f(c['worst_abs_err'], '.1f', 100)}% | "
                     f"{_f(c.get('tolerance'), '.0f', 100)}% | {c['pass']} |")
    return "\n".join(lines) + "\n"


def summary(report: dict) -> str:
    failed = [s["name"] for s in report["stages"] if s["rc"] != "0"]
    out = [f"stages: {len(report['stages']) - len(failed)} ok" + (f", FAILED: {', '.join(failed)}" if failed else "")]
    for name, c in report["checks"].items():
        out.append(f"{name}: " + ("no data" if c["n"] == 0 else
                                  f"worst {c['worst_abs_err'] * 100:.1f}% over {c['n']} -> {'PASS' if c['pass'] else 'FAIL'}"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("env", help="write the environment record")
    e.add_argument("--device", default="cuda")
    e.add_argument("--out", required=True)
    v = sub.add_parser("validate", help="validate the top layouts, the JSON rewritten after each")
    v.add_argument("--model", required=True)
    v.add_argument("--cluster", required=True)
    v.add_argument("--global-batch", type=int, required=True)
    v.add_argument("--top-k", type=int, default=4)
    v.add_argument("--steps", type=int, default=3)
    v.add_argument("--warmup", type=int, default=1)
    v.add_argument("--time-left-s", type=float, default=150.0)
    v.add_argument("--out", required=True)
    f = sub.add_parser("fp8", help="one block in bf16 and in fp8 (torchao), beside the analytic model's speed-up")
    f.add_argument("--models", default=FP8_SHAPES, help="model:mbs,... (default %(default)s)")
    f.add_argument("--device", default="cuda")
    f.add_argument("--time-left-s", type=float, default=150.0)
    f.add_argument("--out", required=True)
    r = sub.add_parser("report", help="write gpu_check.json and gpu_check.md from a work directory")
    r.add_argument("--work", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--catalogue", default="dgx-h200-141gb:1", help="catalogue entry whose analytic profile to compare")
    args = p.parse_args(argv)
    if args.cmd == "env":
        Path(args.out).write_text(json.dumps(environment(args.device), indent=2))
        return 0
    if args.cmd == "fp8":
        res = fp8_blocks(args.models, args.device, Path(args.out), args.time_left_s)
        print(json.dumps(res))
        return 0
    if args.cmd == "validate":
        validate_incrementally(args.model, args.cluster, args.global_batch, top_k=args.top_k, steps=args.steps,
                               warmup=args.warmup, out=Path(args.out), time_left_s=args.time_left_s)
        return 0
    report = build_report(Path(args.work), args.catalogue)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    md = markdown(report)
    (out / "gpu_check.md").write_text(md)
    print(md)
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
