"""``autoplan run``, ``validate``, ``demo`` and ``tokenize``: train with a plan, measure plans against
their predictions, the whole pipeline on this machine, and the token files training reads (the
execution stage)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from autoplan.cli.common import MODEL_HELP, OPTIMIZER_HELP, PRECISION_HELP, parse_bytes
from autoplan.plan.training import Optimizer
from autoplan.profile.formats import Precision

if TYPE_CHECKING:
    from autoplan.plan.plan import Plan


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
    if str(plan).startswith("-"):    # `autoplan run --plan p.json`: the option was taken for the plan's path
        raise InputError(f"autoplan run has no option {str(plan).split('=')[0]}: the plan is its first argument: "
                         "autoplan run PLAN [OPTIONS] -- SCRIPT [ARGS...]")
    if args and args[0].startswith("-") and args[0] != "--":    # an option run does not have, before the script
        raise InputError(f"autoplan run has no option {args[0].split('=')[0]} (the plan sets the processes per "
                         "node; see autoplan run --help): autoplan run PLAN [OPTIONS] -- SCRIPT [ARGS...]")
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        raise InputError("autoplan run needs a script: autoplan run PLAN -- SCRIPT [ARGS...]")
    loaded = Plan.load(plan)
    loaded.check_runnable_here()   # refuse a malformed plan, or one for another framework, first
    _check_precision_here(loaded)
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


def validate(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    cluster: str = typer.Option(..., "--cluster", help="a measured cluster profile JSON of this machine's processes"),
    global_batch: int = typer.Option(..., "--global-batch", help="sequences per optimizer step"),
    top_k: int = typer.Option(3, "--top-k", help="run the chosen layout and this many in all"),
    all_layouts: bool = typer.Option(False, "--all", help="run every layout that fits (small worlds only)"),
    steps: int = typer.Option(4, help="timed steps per layout (after warm-up)"),      # validate.TIMED_STEPS
    warmup: int = typer.Option(2, help="untimed warm-up steps per layout"),          # validate.WARMUP_STEPS
    confirm: int = typer.Option(2, "--confirm", help="measure the chosen layout and every layout measured faster "
                                                     "or at most 30% slower again, side by side in one job, this many "
                                                     "times --steps steps each, one step of each in turn, and judge "
                                                     "the choice round by round against the layout of the lowest "
                                                     "median (0: each layout once; a busy or shared machine needs "
                                                     "3)"),     # validate.CONFIRM_WITHIN
    calibrate: bool = typer.Option(False, help="fit the cost model to the measurements and write it into the cluster profile"),
    out: Optional[Path] = typer.Option(None, "--out", help="write here the plan of the layout that ran fastest (of "
                                                         "those timed in turn where --confirm ran; else of the single "
                                                         "runs): the model's choice, or the one the measurement "
                                                         "preferred among the layouts it could not tell apart"),
    as_json: bool = typer.Option(False, "--json", help="print JSON: runs (a list), chosen (0, the model's "
                                                            "choice) and fastest_measured (the index of the run --out "
                                                            "writes; null if none ran)"),
    optimizer: Optimizer = typer.Option("adamw", help=OPTIMIZER_HELP),
    memory_per_device: Optional[str] = typer.Option(None, help="override the device memory budget"),
    precision: Optional[Precision] = typer.Option(None, help=PRECISION_HELP + "; a model profile file's own by default"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="draw predicted against measured step time and memory "
                                                            "into this .png or .svg (needs matplotlib)"),
) -> None:
    """Run the chosen plan and alternatives for a few steps; report predicted against measured."""
    from autoplan.plan.api import make_problem
    from autoplan.validate import (MIN_CALIBRATION_RUNS, calibrate_cluster_file, choice_verdict, fidelity,
                                   measured_pick, print_table, write_measured_pick)
    from autoplan.jsonio import refuse_directory
    from autoplan.validate import validate as do_validate
    if out is not None:
        refuse_directory(out, option="--out", what="the plan file", example="plan.json")   # before minutes of runs
    if plot is not None:
        from autoplan.draw import check_out_path
        check_out_path(plot)
    pb = make_problem(model, cluster, global_batch, optimizer=optimizer, precision=precision,
                      memory_per_device_bytes=parse_bytes(memory_per_device))
    say = (lambda s: None) if as_json else (lambda s: typer.echo(s, err=True))
    runs = do_validate(pb, top_k=top_k, all_layouts=all_layouts, steps=steps, warmup=warmup, progress=say,
                       min_layouts=MIN_CALIBRATION_RUNS if calibrate else 0, confirm=confirm)
    if plot is not None:
        from autoplan.draw import draw_validation
        draw_validation(runs, plot, title=f"{model} on {cluster}, global batch {global_batch}: predicted against measured",
                        budget_bytes=pb.cluster.device.memory_bytes)
        typer.echo(f"wrote {plot}", err=True)
    if as_json:
        typer.echo(json.dumps({"runs": [r.to_dict() for r in runs], "chosen": 0, "fastest_measured": measured_pick(runs)},
                              indent=2))
    else:
        print_table(runs)
        if sum(r.measured is not None for r in runs) >= 2:
            f = fidelity(runs)
            typer.echo(f"step-time error {f.time_mape * 100:.1f}% (mean abs), rank correlation {f.rank_correlation:.2f}, "
                       f"{choice_verdict(f)}, worst memory under-prediction "
                       f"{f.worst_memory_underprediction * 100:.1f}%")
            from autoplan.execute.group_profile import job_spread_line
            spread = job_spread_line(pb.profile, pb.cluster.world_size)
            if spread:
                typer.echo(f"the model profile: {spread}; the same step moves that much from one job to the next "
                           "here, so errors of that size need not be the model's")
    if out is not None:
        typer.echo(write_measured_pick(pb, runs, out), err=as_json)
    if calibrate:
        cal = calibrate_cluster_file(runs, cluster, pb.cluster.calibration)
        typer.echo(f"calibrated {cluster}: {cal.summary()}", err=as_json)


def tokenize(
    text: Path = typer.Argument(..., help="UTF-8 text file"),
    tokenizer: Path = typer.Option(..., "--tokenizer", help="local Hugging Face tokenizer directory"),
    out: Path = typer.Option(..., "--out", help="token file to write (.bin; a .bin.json description beside it)"),
    model: Optional[str] = typer.Option(None, "--model", help="the model the tokens are for (checks the vocabulary "
                                                              "and sets the token width)"),
) -> None:
    """Tokenize a text file into a flat token file for training (little-endian uint16, uint32 for
    vocabularies over 65,536 ids)."""
    from autoplan.execute.token_data import model_vocab, tokenize_text
    meta = tokenize_text(text, tokenizer, out, model_vocab=None if model is None else model_vocab(model))
    typer.echo(f"wrote {out}: {meta['num_tokens']} tokens ({meta['dtype']}, tokenizer vocabulary "
               f"{meta['vocab_size']})", err=True)


def _check_precision_here(plan: Plan) -> None:
    """An fp8 plan on a machine that cannot train fp8 is refused here, in one line, before torchrun
    starts workers that would each refuse it (and torchrun would add its own failure report)."""
    from autoplan.profile.formats import is_fp8
    if not is_fp8(plan.training.precision):
        return
    import torch

    from autoplan.execute.fp8 import check_fp8
    check_fp8(torch.device("cuda" if torch.cuda.is_available() else "cpu"), plan.layout.tp)  # the workers' device
