"""``autoplan solve``, ``estimate`` and ``show``: choose a layout, cost one, draw one (the planning stage)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import typer

from autoplan.cli.common import (CLUSTER_HELP, FRAMEWORK_HELP, LAYOUT_HELP, MODEL_HELP, OPTIMIZER_HELP,
                                 PRECISION_HELP, PRESET_OPTION_HELP, console, parse_bytes, progress)
from autoplan.plan.training import Optimizer
from autoplan.plan.presets import Preset
from autoplan.profile.formats import Precision


def print_plan(plan, out_path: Optional[Path]) -> None:
    con = console()
    lay, p, s = plan.layout, plan.predicted, plan.solver
    con.print(f"[bold]layout[/bold]   {lay.short()}")
    for i, st in enumerate(lay.stages):
        shown = st if len(st) <= 6 else st[:2] + ["..."] + st[-2:]
        con.print(f"  stage {i}: {', '.join(shown)}  ({len(st)} layer{'' if len(st) == 1 else 's'})")
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


def solve(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help=CLUSTER_HELP),
    global_batch: int = typer.Option(..., "--global-batch", help="sequences per optimizer step"),
    seq_len: Optional[int] = typer.Option(None, help="sequence length (default: the model's)"),
    layout: Optional[str] = typer.Option(None, "--layout", help=LAYOUT_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="write the plan JSON here"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    precision: Optional[Precision] = typer.Option(None, help=PRECISION_HELP + "; a model profile file's own by default"),
    optimizer: Optimizer = typer.Option("adamw", help=OPTIMIZER_HELP),
    framework: str = typer.Option("autoplan", "--framework", help=FRAMEWORK_HELP),
    memory_per_device: Optional[str] = typer.Option(None, help="override the device memory budget, e.g. 256MiB"),
    top_k: int = typer.Option(5, help="layouts to keep, the chosen one and its runner-ups (0 or 1: the chosen only)"),
    time_limit: float = typer.Option(10.0, help="solver time limit per placement ILP, seconds; it also sets "
                                      "the node limit (50 per second) that stops a solve the same way on any machine"),
    solver: str = typer.Option("auto", help="ILP solver: highs, cbc, or auto (HiGHS when the highspy package is "
                                            "installed, else the CBC that ships with pulp)"),
    tp_across_nodes: bool = typer.Option(False, help="allow tensor parallel groups to span nodes"),
    preset: Optional[Preset] = typer.Option(None, help=PRESET_OPTION_HELP),
    per_layer_recompute: bool = typer.Option(False, help="let the ILP choose each block's recompute mode per "
                                                         "pipeline rank where no recomputation does not fit"),
    allow_lossy: Optional[str] = typer.Option(None, help="LOSSY options the plan may use on a slow network, "
                                              "comma-separated: fp16 and powersgd (gradient compression), localsgd "
                                              "(average parameters every 2/4/8 steps). They change the training "
                                              "mathematics; the plan says how."),
) -> None:
    """Choose the layout (dp x tp x pp, stages, micro-batching, ZeRO, recompute) with the least predicted step time."""
    from autoplan.plan.api import fixed_micro_batch, make_problem, solve_problem
    from autoplan.plan.layout_input import parse_layout_constraints
    from autoplan.plan.presets import with_preset
    from autoplan.plan.search import SearchOptions
    from autoplan.jsonio import refuse_directory
    from autoplan.validate import validate_command
    if out:
        refuse_directory(out, option="--out", what="the plan file", example="plan.json")
    fixed_text = parse_layout_constraints(layout)
    pb = make_problem(model, cluster, global_batch, precision=precision, optimizer=optimizer, seq_len=seq_len,
                      memory_per_device_bytes=parse_bytes(memory_per_device), framework=framework,
                      micro_batch_sizes=fixed_micro_batch(fixed_text))
    fixed = with_preset(preset, fixed_text, pb.profile, pb.cluster)
    lossy = tuple(x.strip() for x in (allow_lossy or "").split(",") if x.strip())
    opts = SearchOptions(fixed=fixed, top_k=top_k, ilp_time_limit_s=time_limit, tp_within_node=not tp_across_nodes,
                         per_layer_recompute=per_layer_recompute, allow_lossy=lossy, solver=solver)
    with progress("solving", enabled=not as_json) as update:
        plan = solve_problem(pb, opts, progress=lambda d, t: update(d, t, ""))
    if out:
        plan.save(out)
    if as_json:
        typer.echo(json.dumps(plan.to_dict(), indent=2))
        return
    print_plan(plan, out)
    if pb.cluster.source != "catalogue" and layout is None and preset is None:
        print_close_call(plan, lambda k: validate_command(
            model, cluster, global_batch, top_k=k, out="plan.json", optimizer=optimizer, precision=precision,
            memory_per_device=memory_per_device, seq_len=seq_len, framework=framework))


def print_close_call(plan, command: Callable[[int], list[str] | None]) -> None:
    """Say where runner-ups are predicted too close to the chosen layout for the cost model to tell apart
    (:func:`autoplan.plan.explain.close_calls`), and ``command(top_k)``, the validate command that times them
    side by side on this machine (None: no command to give)."""
    import shlex

    from autoplan.plan.explain import close_call_summary, close_calls
    near = close_calls(plan)
    if not near:
        return
    console().print(f"[bold]close call[/bold] {close_call_summary(plan, near)}")
    argv = command(len(near) + 1)
    if argv is not None:
        typer.echo("  to time them side by side on this machine and keep the fastest:")
        typer.echo(f"    {shlex.join(argv)}")     # plain echo: one unbroken, copyable line whatever the width


def estimate(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help=CLUSTER_HELP),
    global_batch: int = typer.Option(..., "--global-batch", help="sequences per optimizer step"),
    layout: str = typer.Option(..., "--layout", help="the layout to cost; missing fields: tp=pp=1, dp=rest, mbs=1, "
                                                     "micro-batches from the batch. " + LAYOUT_HELP),
    seq_len: Optional[int] = typer.Option(None, help="sequence length (default: the model's)"),
    as_json: bool = typer.Option(False, "--json", help="print {layout, predicted, fits} as JSON"),
    precision: Optional[Precision] = typer.Option(None, help=PRECISION_HELP + "; a model profile file's own by default"),
    optimizer: Optimizer = typer.Option("adamw", help=OPTIMIZER_HELP),
    memory_per_device: Optional[str] = typer.Option(None, help="override the device memory budget"),
    framework: str = typer.Option("autoplan", "--framework", help=FRAMEWORK_HELP),
) -> None:
    """Predict the step time and memory of one given layout, with the same cost model as solve.

    When the layout gives no stages, the solver's partitioner places the layers for those degrees."""
    from autoplan.plan.api import estimate as estimate_layout
    lay, pred = estimate_layout(model, cluster, global_batch, layout, precision=precision, optimizer=optimizer,
                                seq_len=seq_len, memory_per_device_bytes=parse_bytes(memory_per_device),
                                framework=framework)
    if as_json:
        typer.echo(json.dumps({"layout": lay.to_dict(), "predicted": pred.to_dict(), "fits": pred.fits}, indent=2))
        return
    typer.echo(f"layout    {lay.short()}  stages {[len(s) for s in lay.stages]}")
    typer.echo(f"predicted step {pred.step_time_s * 1e3:.3f} ms, peak memory {pred.peak_memory_bytes / 2**20:.1f} MiB "
               f"per device: {'fits' if pred.fits else 'DOES NOT FIT'}")
    typer.echo("  " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in pred.breakdown_s.items() if v > 0))


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
                       memory_per_device_bytes=parse_bytes(memory_per_device), plan_path=plan)
    for n in fig.notes:
        typer.echo(f"note: {n}", err=True)
    draw_plan(fig, out)
    tl = fig.timeline
    if as_json:
        typer.echo(json.dumps({"out": str(out), **fig.to_dict()}, indent=2))
        return
    typer.echo(f"wrote {out}: {fig.layout.short()}, step {tl.step_time_s * 1e3:.3f} ms drawn "
               f"(predicted {fig.predicted.step_time_s * 1e3:.3f} ms), peak memory "
               f"{fig.predicted.peak_memory_bytes / 2**20:.1f} MiB of {fig.budget_bytes / 2**20:.0f} MiB")
