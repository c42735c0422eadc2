"""The ``autoplan`` command line: thin typed wrappers over the library.

This is the only place that turns errors into exit codes: an :class:`AutoplanError` (bad input,
impossible layout, a model that fits nowhere) becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import typer

from autoplan.errors import AutoplanError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure, choose and apply the hybrid parallel layout (DP/ZeRO, TP, PP) for training a "
                       "PyTorch model.  profile -> solve -> run; `autoplan demo` does all three on this machine.")
profile_app = typer.Typer(no_args_is_help=True, help="Measure a model's layers and this machine's processes in one "
                          "command (autoplan profile --model M --nproc N writes model.json and cluster.json), or one "
                          "of them: profile model, profile cluster.")
app.add_typer(profile_app, name="profile")


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version
        try:
            typer.echo(f"autoplan {version('autoplan')}")
        except PackageNotFoundError:
            typer.echo("autoplan (not installed: no package metadata)")
        raise typer.Exit(0)


@app.callback()
def _main_options(
    _version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                  help="print autoplan's version and exit"),
) -> None:
    """Measure, choose and apply the hybrid parallel layout (DP/ZeRO, TP, PP) for training a PyTorch model.
    profile -> solve -> run; `autoplan demo` does all three on this machine."""

MODEL_HELP = ("built-in name (gpt-tiny, gpt-small, gpt3-175b, llama3-8b, ...), a shape JSON file "
              "(layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len), a model profile JSON, "
              "hf:gpt2-tiny / hf:llama-tiny / hf:NAME,key=value (Hugging Face config, random weights), "
              "hf:DIR (a local Hugging Face checkpoint directory) "
              "or path/file.py:factory")
CLUSTER_HELP = "a cluster profile JSON (autoplan profile cluster) or a catalogue entry NAME:NODES, e.g. dgx-a100-80gb:16"
PRESET_OPTION_HELP = ("a hand layout as constraints: ddp, zero1, zero2, zero3 (FSDP), megatron (TP over a node + SP, "
                      "PP across nodes); --layout fields override it")
PRECISION_HELP = ("training precision bf16|fp16|fp32|fp8|fp8-rowwise (bf16/fp16: mixed, fp32 master weights; fp8: bf16 mixed with "
                  "fp8 GEMMs in the linear layers, one scale per tensor, H100/H200 only; fp8-rowwise: one scale per row, "
                  "torchao's rowwise recipe; default: bf16 on CUDA, fp32 on CPU)")
FRAMEWORK_HELP = ("the software that will run the plan, whose costs and rules are used: autoplan (this project's "
                  "executor, which `autoplan run` and `validate` run), megatron, torchtitan, deepspeed, composer; "
                  "NAME@RELEASE for an older release (megatron@2021, megatron@2022, megatron@2024); frameworks other "
                  "than autoplan are costed on catalogue clusters")
LAYOUT_HELP = ("fix part of the layout, e.g. 'tp=2,pp=2' or 'dp=4,zero=3'; keys: dp tp pp vp mbs "
               "num_microbatches zero(0-3) recompute(none|selective|full) schedule(gpipe|1f1b|interleaved) sp(0/1) "
               "grad_compression(none|fp16|powersgd, lossy) sync_every(N: local SGD, lossy) "
               "stage_blocks(estimate: blocks per pipeline chunk, e.g. 5/6/6/5)")


def _err(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)


@contextmanager
def _progress(description: str, enabled: bool = True) -> Iterator:
    """A rich progress bar on a terminal; nothing otherwise. Yields update(done, total, what)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total, what="": None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[what]}"), transient=True, console=_console(err=True)) as prog:
        task = prog.add_task(description, total=None, what="")

        def update(done: int, total: int, what: str = "") -> None:
            prog.update(task, completed=done, total=total, what=what)
        yield update


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Each distinct :class:`AutoplanWarning` the library raises while active becomes one ``warning: ...``
    line on stderr once the command has succeeded (after its output; a failed command prints its one
    ``error:`` line alone); other warnings show as Python shows them."""
    import warnings

    from autoplan.errors import AutoplanWarning
    said: dict[str, None] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("always", AutoplanWarning)
        show_python = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None) -> None:
            if issubclass(category, AutoplanWarning):
                said[str(message)] = None
            else:
                show_python(message, category, filename, lineno, file, line)
        warnings.showwarning = show
        yield
    for message in said:
        typer.echo(f"warning: {message}", err=True)


def _console(err: bool = False):
    from rich.console import Console
    stream = sys.stderr if err else sys.stdout
    return Console(stderr=err, highlight=False, width=None if stream.isatty() else 160)


def _parse_bytes(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    from autoplan.profile.links import parse_bytes
    return parse_bytes(text)


def _int_list(text: str, what: str) -> tuple[int, ...]:
    from autoplan.errors import InputError
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"{what} must be a comma-separated list of integers, got {text[:60]!r}") from None
    if not vals or any(not 1 <= v <= 2 ** 20 for v in vals):
        raise InputError(f"{what} must list integers from 1 to {2 ** 20}, got {text[:60]!r}")
    return vals


# --------------------------------------------------------------------------------------------
# profile
# --------------------------------------------------------------------------------------------

@profile_app.callback(invoke_without_command=True)
def profile_both(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_HELP),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="local processes (devices): the model is measured "
                                                               "alone and inside groups of N, the links between N"),
    memory_per_device: Optional[str] = typer.Option(None, help="memory budget per device, e.g. 48MiB (CPU)"),
    mbs: str = typer.Option("1,2,4", help="micro-batch sizes to measure, comma-separated"),
    model_out: Path = typer.Option(Path("model.json"), "--model-out", help="where to write the model profile"),
    cluster_out: Path = typer.Option(Path("cluster.json"), "--cluster-out", help="where to write the cluster profile"),
    repeats: Optional[int] = typer.Option(None, help="timed repeats per figure, both profiles (default: theirs)"),
    max_size: Optional[str] = typer.Option(None, help="largest message size measured (default: profile cluster's)"),
) -> None:
    """Both profiles the planner needs, measured the accurate way: ``profile model --nproc N`` then
    ``profile cluster --nproc N`` with these options (each subcommand's other options at their defaults)."""
    from autoplan.errors import InputError
    given = [o for o, v in (("--model", model), ("--nproc", nproc), ("--memory-per-device", memory_per_device))
             if v is not None]
    if ctx.invoked_subcommand is not None:
        if given:
            raise InputError(f"give {given[0]} after `autoplan profile {ctx.invoked_subcommand}`, or leave out the "
                             f"subcommand to measure the model and the cluster in one command")
        return
    if model is None or nproc is None:
        raise InputError("autoplan profile needs --model M and --nproc N (it measures both; or use "
                         "profile model / profile cluster)")
    both = ["--repeats", str(repeats)] if repeats is not None else []
    runs = [("model", ["--model", model, "--out", str(model_out), "--mbs", mbs, "--nproc", str(nproc), *both]),
            ("cluster", ["--nproc", str(nproc), "--out", str(cluster_out), *both]
             + (["--memory-per-device", memory_per_device] if memory_per_device else [])
             + (["--max-size", max_size] if max_size else []))]
    for name, args in runs:
        cmd = ctx.command.get_command(ctx, name)
        with cmd.make_context(name, args, parent=ctx) as sub:
            cmd.invoke(sub)


@profile_app.command("model")
def profile_model_cmd(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    out: Path = typer.Option(..., "--out", help="where to write the model profile JSON"),
    mbs: str = typer.Option("1,2,4", help="micro-batch sizes to measure, comma-separated"),
    tp: str = typer.Option("1", help="tensor-parallel degrees to measure the sharded block at, e.g. 1,2,4"),
    seq_len: Optional[int] = typer.Option(None, help="sequence length (default: the model's)"),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N"),
    precision: Optional[str] = typer.Option(None, help=PRECISION_HELP + "; the profile plans only this precision"),
    repeats: int = typer.Option(5, help="timed repeats per figure (the median is kept)"),
    warmup: int = typer.Option(2, help="untimed warm-up iterations"),
    threads: Optional[int] = typer.Option(None, help="torch threads while measuring (default: torch's)"),
    nproc: Optional[str] = typer.Option(None, "--nproc", help="also measure inside real process groups of N local "
                                        "processes working at once, e.g. 4 or 2,4: TP blocks through DTensor with "
                                        "their collectives, ZeRO-3 blocks through FSDP2, the optimizer on sharded "
                                        "parameters, contention for shared cores; solve then costs layouts on an "
                                        "N-device cluster from these figures (recommended: the size you train on)"),
    as_json: bool = typer.Option(False, "--json", help="print {out, layers, params, block: {...}} as JSON"),
) -> None:
    """Measure each layer kind's forward/backward time, parameter, saved-activation and boundary bytes.

    Mixed precision (bf16, fp16) is measured as the executor trains it: fp32 parameters, forward under
    torch.autocast."""
    from autoplan.profile.layers import default_precision, profile_model
    precision = precision or default_precision(device)
    worlds = _int_list(nproc, "--nproc") if nproc is not None else ()
    mbs_list = _int_list(mbs, "--mbs")
    with _progress("profiling layers") as update:
        prof = profile_model(model, mbs_list=mbs_list, tp_list=_int_list(tp, "--tp"),
                             seq_len=seq_len, device=device, repeats=repeats, warmup=warmup, threads=threads,
                             precision=precision, progress=lambda e: update(e.done, e.total, e.what))
    if worlds:
        from autoplan.execute.group_profile import GroupProfileConfig, profile_groups_into
        cfg = GroupProfileConfig(spec=model, mbs_list=mbs_list, seq_len=prof.seq_len, warmup=warmup,
                                 precision=precision)
        for world in worlds:
            with _progress(f"in groups of {world} processes") as update:
                profile_groups_into(prof, cfg, world, progress=update)
    prof.save(out)
    blk = prof.kinds.get("block")
    t = blk.timing(min(mbs_list), 1) if blk else None
    if as_json:
        typer.echo(json.dumps({"out": str(out), "layers": len(prof.layers), "params": prof.total_params(),
                               "precision": precision,
                               "block": None if t is None else {"mbs": t.mbs, "forward_s": t.forward_s,
                                                                "backward_s": t.backward_s}}, indent=2))
        return
    summary = f"wrote {out}: {len(prof.layers)} layers, {prof.total_params() / 1e6:.2f} M params, {precision}"
    if t:
        summary += f"; block fwd {t.forward_s * 1e3:.2f} ms bwd {t.backward_s * 1e3:.2f} ms at mbs {t.mbs}"
    typer.echo(summary)


@profile_app.command("cluster")
def profile_cluster_cmd(
    nproc: Optional[int] = typer.Option(None, "--nproc", help="local processes (devices) to measure; leave it out "
                                                               "under torchrun to measure the job's nodes"),
    out: Path = typer.Option(..., "--out", help="where to write the cluster profile JSON"),
    memory_per_device: Optional[str] = typer.Option(None, help="memory budget per device, e.g. 512MiB (CPU)"),
    max_size: str = typer.Option("4MiB", help="largest message size measured"),
    repeats: int = typer.Option(5, help="timed repeats per size (median kept)"),
    device: str = typer.Option("cpu", help="with --nproc 1: cpu, cuda or cuda:N (one GPU is a one-device cluster); "
                                           "several local processes are CPU processes"),
    as_json: bool = typer.Option(False, "--json", help="print {out, world_size, memory_per_device_bytes, "
                                                       "all_reduce: {...}} as JSON"),
) -> None:
    """Measure all-reduce, all-gather, reduce-scatter and send/recv; fit latency and bandwidth.

    --nproc 1 measures one device (matmul rate, copy bandwidth, memory; no links): a one-device
    cluster, on which solve still chooses the micro-batch size and recomputation.

    Across nodes, run it under torchrun on every node (rank 0 writes OUT):
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:PORT
    -m autoplan.cli profile cluster --out cluster.json"""
    import os

    from autoplan.errors import InputError
    from autoplan.profile.links import profile_cluster, profile_cluster_in_job, profile_one_device
    mem = _parse_bytes(memory_per_device)
    if nproc is not None and nproc < 1:
        raise InputError(f"--nproc must be >= 1, got {nproc}")
    if nproc == 1:
        cl = profile_one_device(device, memory_per_device_bytes=mem)
    elif nproc is not None and device != "cpu":
        raise InputError(f"--device {device}: several local processes are measured as CPU processes; "
                         f"for several GPUs run under torchrun (see --help)")
    elif nproc is None:
        if "RANK" not in os.environ:
            raise InputError("profile cluster needs --nproc N (local processes), or to run under torchrun")
        in_job = profile_cluster_in_job(out_path=out, memory_per_device_bytes=mem, max_size_bytes=_parse_bytes(max_size),
                                        repeats=repeats)
        if in_job is None:      # not rank 0: rank 0 writes and reports
            return
        cl = in_job
    else:
        with _progress("profiling links") as update:
            cl = profile_cluster(nproc, memory_per_device_bytes=mem, max_size_bytes=_parse_bytes(max_size),
                                 repeats=repeats, progress=lambda e: update(e.done, e.total, e.what))
    cl.save(out)
    ar = cl.links.get("intra_node", {}).get("all_reduce", {})
    if as_json:
        fit = ar[max(ar)] if ar else None
        typer.echo(json.dumps({"out": str(out), "world_size": cl.world_size, "num_nodes": cl.num_nodes,
                               "memory_per_device_bytes": cl.device.memory_bytes,
                               "all_reduce": None if fit is None else {
                                   "group_size": max(ar), "latency_s": fit.latency_s,
                                   "bandwidth_bytes_per_s": fit.bandwidth_bytes_per_s}}, indent=2))
        return
    line = f"wrote {out}: {cl.world_size} devices, {cl.device.memory_bytes / 2**20:.0f} MiB each"
    if cl.world_size == 1:
        line = (f"wrote {out}: 1 device ({cl.device.name or cl.device.type}), {cl.device.memory_bytes / 2**20:.0f} MiB, "
                f"matmul {cl.device.compute_flops_per_s / 1e12:.3f} TFLOP/s, "
                f"copy {cl.device.memory_bandwidth_bytes_per_s / 1e9:.1f} GB/s")
    if ar:
        g = max(ar)
        line += f"; all_reduce on {g}: {ar[g].latency_s * 1e6:.1f} us + n / {ar[g].bandwidth_bytes_per_s / 1e9:.2f} GB/s"
    inter = cl.links.get("inter_node", {}).get("all_reduce", {})
    if inter:
        g = max(inter)
        line += (f"; {cl.num_nodes} nodes x {cl.devices_per_node}, inter-node all_reduce on {g}: "
                 f"{inter[g].latency_s * 1e6:.1f} us + n / {inter[g].bandwidth_bytes_per_s / 1e9:.3f} GB/s")
    typer.echo(line)


# --------------------------------------------------------------------------------------------
# solve / estimate
# --------------------------------------------------------------------------------------------

def _print_plan(plan, out_path: Optional[Path]) -> None:
    con = _console()
    lay, p, s = plan.layout, plan.predicted, plan.solver
    con.print(f"[bold]layout[/bold]   {lay.short()}")
    for i, st in enumerate(lay.stages):
        shown = st if len(st) <= 6 else st[:2] + ["..."] + st[-2:]
        con.print(f"  stage {i}: {', '.join(shown)}  ({len(st)} layers)")
    con.print(f"[bold]predicted[/bold] step {p.step_time_s * 1e3:.3f} ms, {p.throughput_samples_per_s:.1f} samples/s, "
              f"peak memory {p.peak_memory_bytes / 2**20:.1f} MiB per device")
    con.print("  " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in p.breakdown_s.items() if v > 0))
    con.print(f"[bold]solver[/bold]   {s.status}, objective {s.objective * 1e3:.3f} ms, bound {s.bound * 1e3:.3f} ms "
              f"(gap {s.gap * 100:.2f}%), {s.layouts_considered} layouts, {s.layouts_pruned} pruned by bound, "
              f"{s.ilps_solved} ILPs, {s.wall_s:.2f} s")
    if plan.alternatives:
        con.print("[bold]why[/bold]")
        for line in plan.explanation[2:]:
            con.print("  " + line)
    if out_path:
        con.print(f"wrote {out_path}")


@app.command()
def solve(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help=CLUSTER_HELP),
    global_batch: int = typer.Option(..., "--global-batch", help="sequences per optimizer step"),
    seq_len: Optional[int] = typer.Option(None, help="sequence length (default: the model's)"),
    layout: Optional[str] = typer.Option(None, "--layout", help=LAYOUT_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="write the plan JSON here"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    precision: Optional[str] = typer.Option(None, help=PRECISION_HELP + "; a model profile file's own by default"),
    optimizer: str = typer.Option("adamw", help="adamw|sgd, or adamw-bf16 (16-bit Adam state; --framework megatron@2024) (sets optimizer-state memory)"),
    framework: str = typer.Option("autoplan", "--framework", help=FRAMEWORK_HELP),
    memory_per_device: Optional[str] = typer.Option(None, help="override the device memory budget, e.g. 256MiB"),
    top_k: int = typer.Option(5, help="layouts to keep, the chosen one and its runner-ups (0 or 1: the chosen only)"),
    time_limit: float = typer.Option(10.0, help="solver time limit per placement ILP, seconds"),
    solver: str = typer.Option("auto", help="ILP solver: highs, cbc, or auto (HiGHS when the highspy package is "
                                            "installed, else the CBC that ships with pulp)"),
    tp_across_nodes: bool = typer.Option(False, help="allow tensor parallel groups to span nodes"),
    preset: Optional[str] = typer.Option(None, help=PRESET_OPTION_HELP),
    per_layer_recompute: bool = typer.Option(False, help="let the ILP choose each block's recompute mode per "
                                                         "pipeline rank where no recomputation does not fit"),
    allow_lossy: Optional[str] = typer.Option(None, help="LOSSY options the plan may use on a slow network, "
                                              "comma-separated: fp16 and powersgd (gradient compression), localsgd "
                                              "(average parameters every 2/4/8 steps). They change the training "
                                              "mathematics; the plan says how."),
) -> None:
    """Choose the layout (dp x tp x pp, stages, micro-batching, ZeRO, recompute) with the least predicted step time."""
    from autoplan.plan.api import fixed_micro_batch, make_problem, solve_problem
    from autoplan.plan.plan import parse_layout_constraints
    from autoplan.plan.presets import preset_constraints
    from autoplan.plan.search import SearchOptions
    fixed_text = parse_layout_constraints(layout)
    pb = make_problem(model, cluster, global_batch, precision=precision, optimizer=optimizer, seq_len=seq_len,
                      memory_per_device_bytes=_parse_bytes(memory_per_device), framework=framework,
                      micro_batch_sizes=fixed_micro_batch(fixed_text))
    fixed = {**(preset_constraints(preset, pb.profile, pb.cluster) if preset else {}), **fixed_text}
    lossy = tuple(x.strip() for x in (allow_lossy or "").split(",") if x.strip())
    opts = SearchOptions(fixed=fixed, top_k=top_k, ilp_time_limit_s=time_limit, tp_within_node=not tp_across_nodes,
                         per_layer_recompute=per_layer_recompute, allow_lossy=lossy, solver=solver)
    with _progress("solving", enabled=not as_json) as update:
        plan = solve_problem(pb, opts, progress=lambda d, t: update(d, t, ""))
    if out:
        plan.save(out)
    if as_json:
        typer.echo(json.dumps(plan.to_dict(), indent=2))
    else:
        _print_plan(plan, out)


@app.command()
def estimate(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help=CLUSTER_HELP),
    global_batch: int = typer.Option(..., "--global-batch", help="sequences per optimizer step"),
    layout: str = typer.Option(..., "--layout", help="the layout to cost; missing fields: tp=pp=1, dp=rest, mbs=1, "
                                                     "micro-batches from the batch. " + LAYOUT_HELP),
    seq_len: Optional[int] = typer.Option(None, help="sequence length (default: the model's)"),
    as_json: bool = typer.Option(False, "--json", help="print {layout, predicted, fits} as JSON"),
    precision: Optional[str] = typer.Option(None, help=PRECISION_HELP + "; a model profile file's own by default"),
    optimizer: str = typer.Option("adamw", help="adamw|sgd, or adamw-bf16 (16-bit Adam state; --framework megatron@2024)"),
    memory_per_device: Optional[str] = typer.Option(None, help="override the device memory budget"),
    framework: str = typer.Option("autoplan", "--framework", help=FRAMEWORK_HELP),
) -> None:
    """Predict the step time and memory of one given layout, with the same cost model as solve.

    When the layout gives no stages, the solver's partitioner places the layers for those degrees."""
    from autoplan.plan.api import estimate as estimate_layout
    lay, pred = estimate_layout(model, cluster, global_batch, layout, precision=precision, optimizer=optimizer,
                                seq_len=seq_len, memory_per_device_bytes=_parse_bytes(memory_per_device),
                                framework=framework)
    if as_json:
        typer.echo(json.dumps({"layout": lay.to_dict(), "predicted": pred.to_dict(), "fits": pred.fits}, indent=2))
        return
    typer.echo(f"layout    {lay.short()}  stages {[len(s) for s in lay.stages]}")
    typer.echo(f"predicted step {pred.step_time_s * 1e3:.3f} ms, peak memory {pred.peak_memory_bytes / 2**20:.1f} MiB "
               f"per device: {'fits' if pred.fits else 'DOES NOT FIT'}")
    typer.echo("  " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in pred.breakdown_s.items() if v > 0))


@app.command()
def validate(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help="a measured cluster profile JSON of this machine's processes"),
    global_batch: int = typer.Option(..., "--global-batch", help="sequences per optimizer step"),
    top_k: int = typer.Option(3, "--top-k", help="run the chosen layout and this many in all"),
    all_layouts: bool = typer.Option(False, "--all", help="run every layout that fits (small worlds only)"),
    steps: int = typer.Option(4, help="timed steps per layout (after warm-up)"),
    warmup: int = typer.Option(2, help="untimed warm-up steps per layout"),
    calibrate: bool = typer.Option(False, help="fit the cost model to the measurements and write it into the cluster profile"),
    as_json: bool = typer.Option(False, "--json", help="print {runs: [...], chosen: 0} as JSON"),
    optimizer: str = typer.Option("adamw", help="adamw|sgd"),
    memory_per_device: Optional[str] = typer.Option(None, help="override the device memory budget"),
    precision: Optional[str] = typer.Option(None, help=PRECISION_HELP + "; a model profile file's own by default"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="draw predicted against measured step time and memory "
                                                            "into this .png or .svg (needs matplotlib)"),
) -> None:
    """Run the chosen plan and alternatives for a few steps; report predicted against measured."""
    from autoplan.errors import InputError
    from autoplan.plan.api import make_problem
    from autoplan.validate import (MIN_CALIBRATION_RUNS, fidelity, fit_calibration, print_table,
                                   validate as do_validate)
    if steps < 1 or warmup < 0:
        raise InputError("--steps must be >= 1 and --warmup >= 0")
    if plot is not None:
        from autoplan.draw import check_out_path
        check_out_path(plot)
    pb = make_problem(model, cluster, global_batch, optimizer=optimizer, precision=precision,
                      memory_per_device_bytes=_parse_bytes(memory_per_device))
    if pb.cluster.source == "catalogue":
        raise InputError("validate runs on this machine: give a measured cluster profile (autoplan profile cluster)")
    say = (lambda s: None) if as_json else (lambda s: typer.echo(s, err=True))
    runs = do_validate(pb, top_k=top_k, all_layouts=all_layouts, steps=steps, warmup=warmup, progress=say,
                       min_layouts=MIN_CALIBRATION_RUNS if calibrate else 0)
    if plot is not None:
        from autoplan.draw import draw_validation
        draw_validation(runs, plot, title=f"{model} on {cluster}, global batch {global_batch}: predicted against measured",
                        budget_bytes=pb.cluster.device.memory_bytes)
        typer.echo(f"wrote {plot}", err=True)
    if as_json:
        typer.echo(json.dumps({"runs": [r.to_dict() for r in runs], "chosen": 0}, indent=2))
    else:
        print_table(runs)
        if sum(r.measured is not None for r in runs) >= 2:
            f = fidelity(runs)
            typer.echo(f"step-time error {f.time_mape * 100:.1f}% (mean abs), rank correlation {f.rank_correlation:.2f}, "
                       f"chosen is {f.chosen_vs_fastest * 100:+.1f}% from the fastest measured, worst memory "
                       f"under-prediction {f.worst_memory_underprediction * 100:.1f}%")
    if calibrate:
        from autoplan.profile.formats import ClusterProfile
        cal = fit_calibration(runs, pb.cluster.calibration)
        prof = ClusterProfile.load(cluster)
        prof.calibration = cal
        prof.save(cluster)
        typer.echo(f"calibrated {cluster}: {cal.summary()}", err=as_json)


# --------------------------------------------------------------------------------------------
# export / show
# --------------------------------------------------------------------------------------------

@app.command("export")
def export_cmd(
    plan: Path = typer.Argument(..., help="plan JSON written by solve"),
    to: str = typer.Option(..., "--to", help="megatron (Megatron-LM command), torchtitan (torchtitan 0.3 command), "
                                             "torchtitan-toml (job file of torchtitan <= 0.2), deepspeed (JSON "
                                             "config) or accelerate (YAML config)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the file here (default: print it)"),
    as_json: bool = typer.Option(False, "--json", help="print {framework, format, config, warnings, text} as JSON"),
) -> None:
    """Write the plan as another framework's configuration.

    What the framework cannot express is refused (exit 2) or approximated with a warning on stderr
    that says what changes."""
    from autoplan.export import export_plan
    from autoplan.plan.plan import Plan
    exp = export_plan(Plan.load(plan), to, str(plan))
    for w in exp.warnings:
        typer.echo(f"warning: {w}", err=True)
    if out:
        exp.save(out)
    if as_json:
        typer.echo(json.dumps(exp.to_dict(), indent=2))
    elif out:
        typer.echo(f"wrote {out} ({exp.framework} {exp.format}); launch: {exp.launch}", err=True)
    else:
        typer.echo(exp.text, nl=False)


@app.command("export-weights")
def export_weights_cmd(
    ckpt_dir: Path = typer.Argument(..., help="checkpoint directory of a training run (its latest step), or one step "
                                              "directory (DCP, any layout)"),
    plan: Path = typer.Option(..., "--plan", help="the plan the model was trained with (names the hf: model)"),
    to_hf: Path = typer.Option(..., "--to-hf", help="new Hugging Face directory to write (safetensors + config.json)"),
) -> None:
    """Write a trained checkpoint of an hf: model as a Hugging Face directory that
    transformers.AutoModelForCausalLM.from_pretrained loads."""
    from autoplan.execute.hf_export import export_plan_weights
    step_dir, files = export_plan_weights(ckpt_dir, plan, to_hf)
    typer.echo(f"wrote {to_hf} from {step_dir}: {', '.join(files)}", err=True)


@app.command()
def tokenize(
    text: Path = typer.Argument(..., help="UTF-8 text file"),
    tokenizer: Path = typer.Option(..., "--tokenizer", help="local Hugging Face tokenizer directory"),
    out: Path = typer.Option(..., "--out", help="token file to write (.bin; a .bin.json description beside it)"),
    model: Optional[str] = typer.Option(None, "--model", help="the model the tokens are for (checks the vocabulary "
                                                              "and sets the token width)"),
) -> None:
    """Tokenize a text file into a flat token file for training (little-endian uint16, uint32 for
    vocabularies over 65,536 ids)."""
    from autoplan.execute.token_data import tokenize_text
    vocab = None
    if model is not None:
        from autoplan.models.source import resolve_model
        shape = resolve_model(model).shape
        if shape is None:
            from autoplan.errors import InputError
            raise InputError(f"--model {model}: its vocabulary is not known without building it; give a "
                             f"transformer spec (hf:DIR, a built-in name, a shape file)")
        vocab = shape.vocab
    meta = tokenize_text(text, tokenizer, out, model_vocab=vocab)
    typer.echo(f"wrote {out}: {meta['num_tokens']} tokens ({meta['dtype']}, tokenizer vocabulary "
               f"{meta['vocab_size']})", err=True)


@app.command()
def show(
    plan: Path = typer.Argument(..., help="plan JSON written by solve"),
    out: Optional[Path] = typer.Option(None, "--out", help="picture to write, .png or .svg (default: PLAN with .png)"),
    model: Optional[str] = typer.Option(None, "--model", help="the model profile or spec, if not where the plan says"),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="the cluster profile or spec, if not where the plan says"),
    memory_per_device: Optional[str] = typer.Option(None, help="the memory budget solve was given, if it was overridden"),
    as_json: bool = typer.Option(False, "--json", help="print the drawn data (timeline bars, memory per rank) as JSON"),
) -> None:
    """Draw the plan: each pipeline rank's step timeline and memory against the budget (from the cost model).

    The timeline runs the plan's schedule (GPipe, 1F1B, interleaved) on the cost model's per-chunk
    costs: forward, recompute and backward of every micro-batch, pipeline sends, bubble, DP sync,
    optimizer. The memory bars stack parameters + gradients + optimizer state, activations, pipeline
    buffers and workspace for each pipeline rank."""
    from autoplan.draw import check_out_path, draw_plan
    from autoplan.plan.figures import plan_figures
    from autoplan.plan.plan import Plan
    out = out or plan.with_suffix(".png")
    check_out_path(out)
    fig = plan_figures(Plan.load(plan), model=model, cluster=cluster,
                       memory_per_device_bytes=_parse_bytes(memory_per_device), plan_path=plan)
    for n in fig.notes:
        typer.echo(f"note: {n}", err=True)
    draw_plan(fig, out)
    tl = fig.timeline
    if as_json:
        from dataclasses import asdict
        typer.echo(json.dumps({"out": str(out), "layout": fig.layout.to_dict(), "predicted": fig.predicted.to_dict(),
                               "timeline": {"step_time_s": tl.step_time_s, "pipeline_s": tl.pipeline_s,
                                            "model_pipeline_s": tl.model_pipeline_s,
                                            "bars": [asdict(b) for b in tl.bars]},
                               "memory_by_rank_bytes": fig.memory_by_rank_bytes, "budget_bytes": fig.budget_bytes,
                               "notes": fig.notes}, indent=2))
        return
    typer.echo(f"wrote {out}: {fig.layout.short()}, step {tl.step_time_s * 1e3:.3f} ms drawn "
               f"(predicted {fig.predicted.step_time_s * 1e3:.3f} ms), peak memory "
               f"{max(sum(d.values()) for d in fig.memory_by_rank_bytes) / 2**20:.1f} MiB of {fig.budget_bytes / 2**20:.0f} MiB")


# --------------------------------------------------------------------------------------------
# run / demo
# --------------------------------------------------------------------------------------------

@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    plan: Path = typer.Argument(..., help="plan JSON written by solve"),
    nnodes: int = typer.Option(1, help="nodes (one torchrun agent per node)"),
    node_rank: Optional[int] = typer.Option(None, help="this node's rank (multi-node)"),
    rdzv_endpoint: Optional[str] = typer.Option(None, help="host:port of the c10d rendezvous (multi-node)"),
    max_restarts: Optional[int] = typer.Option(None, help="restart the workers this often after a failure (they "
                                                          "resume from their checkpoint); default 0, or 3 with --elastic"),
    elastic: bool = typer.Option(False, "--elastic", help="keep training when nodes are lost: re-solve the plan for the "
                                                          "nodes that remain and resume from the last checkpoint; grow "
                                                          "again at a checkpoint when they return (the script needs "
                                                          "--ckpt-dir)"),
    min_nodes: Optional[int] = typer.Option(None, help="with --elastic: the fewest nodes to go on with (default: 1)"),
    rejoin_timeout: float = typer.Option(30.0, help="with --elastic: seconds a lost node has to come back before "
                                                    "the job re-plans without it"),
) -> None:
    """Launch SCRIPT under torchrun with the plan's world size:  autoplan run plan.json -- SCRIPT [ARGS...]"""
    from autoplan.errors import InputError
    from autoplan.plan.plan import Plan
    args = list(ctx.args)
    if args and args[0].startswith("-") and args[0] != "--":    # an option run does not have, before the script
        raise InputError(f"autoplan run has no option {args[0].split('=')[0]} (the plan sets the processes per "
                         "node; see autoplan run --help): autoplan run PLAN [OPTIONS] -- SCRIPT [ARGS...]")
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        raise InputError("autoplan run needs a script: autoplan run PLAN -- SCRIPT [ARGS...]")
    Plan.load(plan).check_runnable_here()   # refuse a malformed plan, or one for another framework, first
    if elastic:
        from autoplan.execute.elastic import DEFAULT_MAX_RESTARTS, elastic_launch
        code = elastic_launch(plan, args[0], args[1:], nnodes=nnodes, min_nodes=min_nodes or 1, node_rank=node_rank,
                              rdzv_endpoint=rdzv_endpoint, rejoin_timeout_s=rejoin_timeout,
                              max_restarts=DEFAULT_MAX_RESTARTS if max_restarts is None else max_restarts)
        raise typer.Exit(code)
    if min_nodes is not None:
        raise InputError("--min-nodes needs --elastic")
    from autoplan.execute.launch import launch
    code = launch(str(plan), args[0], args[1:], nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                  max_restarts=max_restarts or 0)
    raise typer.Exit(code)


@app.command()
def demo(
    model: str = typer.Option("gpt-small", help="reference model to plan and train"),
    nproc: int = typer.Option(4, help="local CPU processes standing in for devices"),
    memory_per_device: str = typer.Option("48MiB", help="per-process memory budget, small enough that the choice matters"),
    global_batch: int = typer.Option(16, help="sequences per step"),
    steps: int = typer.Option(6, help="training steps to run with the chosen plan"),
    workdir: Path = typer.Option(Path("autoplan-demo"), help="where profiles and the plan are written"),
) -> None:
    """The whole pipeline on this machine: profile a model and NPROC local processes, solve, train, compare."""
    from autoplan.demo import run_demo
    raise typer.Exit(run_demo(model=model, nproc=nproc, memory_per_device=memory_per_device,
                              global_batch=global_batch, steps=steps, workdir=workdir))


def _click_exceptions():
    """The module of the click exceptions that typer raises: ``click.exceptions`` up to typer 0.25, typer's own
    vendored copy from 0.26. Found through typer's public ``BadParameter`` (a click ``UsageError``) so that both
    work without importing either private module by name."""
    return sys.modules[typer.BadParameter.__module__]


def _usage_error(e) -> None:
    """click's usage line and help hint, then one ``error:`` line (click itself would write ``Error:``)."""
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        typer.echo(ctx.get_usage(), err=True)
        if ctx.help_option_names:
            typer.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
    _err(" ".join(e.format_message().split()))


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point: AutoplanError or a usage error -> one ``error:`` line and exit 2; Ctrl-C -> one line
    and exit 130 (SIGTERM: 143), after every process the command started has been ended
    (autoplan.processes); otherwise the command's exit code (``run`` passes on the workers')."""
    from autoplan.errors import Interrupted
    from autoplan.processes import interrupts_raise
    clicks = _click_exceptions()
    try:
        # Not standalone: click would print usage errors its own way (rich boxes under typer) and let
        # AutoplanError through as a traceback. In this mode typer.Exit(code) comes back as the return value.
        # SIGINT/SIGTERM raise Interrupted (a BaseException that click and typer leave alone).
        with interrupts_raise(), _warnings_as_lines():
            code = app(args=argv, standalone_mode=False)
    except AutoplanError as e:
        _err(str(e).splitlines()[0] if str(e) else type(e).__name__)
        sys.exit(2)
    except Interrupted as e:
        _interrupted(e.signum)
    except (KeyboardInterrupt, typer.Abort):
        _interrupted(2)
    except typer.Exit as e:
        code = e.exit_code
    except clicks.UsageError as e:  # unknown option or command, missing or malformed value, bad choice
        if isinstance(e, getattr(clicks, "NoArgsIsHelpError", ())):  # bare `autoplan`: the help, as click shows it
            if e.format_message().strip():      # typer's rich help is already printed, the message is empty
                e.show()
            sys.exit(e.exit_code)
        _usage_error(e)
        sys.exit(2)
    except clicks.ClickException as e:  # e.g. a file option that cannot be opened
        _err(" ".join(e.format_message().split()))
        sys.exit(2)
    if code == 130:     # typer >= 0.26 turns Ctrl-C into Exit(130); click into Abort
        _err("interrupted")
    sys.exit(code if isinstance(code, int) else 0)


def _interrupted(signum: int) -> None:
    """End the processes the command started (a second Ctrl-C meanwhile is ignored), say so, exit."""
    import signal

    from autoplan.processes import end_descendants
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        end_descendants()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    _err("interrupted")
    sys.exit(128 + signum)


if __name__ == "__main__":
    main()
