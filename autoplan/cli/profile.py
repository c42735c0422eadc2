"""``autoplan profile``: measure a model's layers and this machine's processes (the first stage)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Optional

import typer

from autoplan.cli.common import MODEL_HELP, PRECISION_HELP, int_list, parse_bytes, progress
from autoplan.profile.formats import Precision

app = typer.Typer(no_args_is_help=True, help="Measure a model's layers and this machine's processes in one "
                  "command (autoplan profile --model M --nproc N writes model.json and cluster.json), or one "
                  "of them: profile model, profile cluster.")


@app.callback(invoke_without_command=True)
def profile_both(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_HELP),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="local processes (devices): the model is measured "
                                                               "alone and inside groups of N, the links between N"),
    memory_per_device: Optional[str] = typer.Option(None, help="memory budget per device, e.g. 48MiB (CPU)"),
    mbs: str = typer.Option("1,2,4", help="micro-batch sizes to measure, comma-separated"),
    model_out: Path = typer.Option(Path("model.json"), "--model-out", help="where to write the model profile"),
    cluster_out: Path = typer.Option(Path("cluster.json"), "--cluster-out", help="where to write the cluster profile"),
    repeats: Optional[int] = typer.Option(None, help="timed repeats per figure, both profiles (default: theirs); the "
                                          "model's in-group figures always take 7"),
    max_size: Optional[str] = typer.Option(None, help="largest message size measured (default: profile cluster's)"),
    group_jobs: Optional[int] = typer.Option(None, "--group-jobs", min=1, help="the model's in-group figures: separate "
                                             "jobs to take the median of (default: profile model's)"),
    keep_jobs: bool = typer.Option(False, "--keep-jobs", help="also write each in-group job's own model profile "
                                   "beside --model-out (model-job1.json ..)"),
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
    from autoplan.jsonio import refuse_directory
    refuse_directory(model_out, option="--model-out", what="the model profile file", example="model.json")
    refuse_directory(cluster_out, option="--cluster-out", what="the cluster profile file", example="cluster.json")
    both = ["--repeats", str(repeats)] if repeats is not None else []
    jobs = (["--group-jobs", str(group_jobs)] if group_jobs is not None else []) + (["--keep-jobs"] if keep_jobs else [])
    runs = [("model", ["--model", model, "--out", str(model_out), "--mbs", mbs, "--nproc", str(nproc), *both, *jobs]),
            ("cluster", ["--nproc", str(nproc), "--out", str(cluster_out), *both]
             + (["--memory-per-device", memory_per_device] if memory_per_device else [])
             + (["--max-size", max_size] if max_size else []))]
    for name, args in runs:
        cmd = ctx.command.get_command(ctx, name)
        with cmd.make_context(name, args, parent=ctx) as sub:
            cmd.invoke(sub)


@app.command("model")
def profile_model_cmd(
    model: str = typer.Option(..., "--model", help=MODEL_HELP),
    out: Path = typer.Option(..., "--out", help="where to write the model profile JSON"),
    mbs: str = typer.Option("1,2,4", help="micro-batch sizes to measure, comma-separated"),
    tp: str = typer.Option("1", help="tensor-parallel degrees to measure the sharded block at, e.g. 1,2,4"),
    seq_len: Optional[int] = typer.Option(None, help="sequence length (default: the model's)"),
    device: str = typer.Option("cpu", help="cpu, cuda or cuda:N"),
    precision: Optional[Precision] = typer.Option(None, help=PRECISION_HELP + "; the profile plans only this precision"),
    repeats: int = typer.Option(5, help="timed repeats per figure measured alone (the median is kept); the figures "
                                        "inside process groups (--nproc) take 7"),
    warmup: int = typer.Option(2, help="untimed warm-up iterations"),
    threads: Optional[int] = typer.Option(None, help="torch threads while measuring (default: torch's)"),
    nproc: Optional[str] = typer.Option(None, "--nproc", help="also measure inside real process groups of N local "
                                        "processes working at once, e.g. 4 or 2,4: TP blocks through DTensor with "
                                        "their collectives, ZeRO-3 blocks through FSDP2, the optimizer on sharded "
                                        "parameters, contention for shared cores; solve then costs layouts on an "
                                        "N-device cluster from these figures (recommended: the size you train on)"),
    group_jobs: Optional[int] = typer.Option(None, "--group-jobs", min=1,
                                             help="with --nproc: measure in groups this many times, each a "
                                                  "separate job, and keep each figure's median over them "
                                                  "(default: 3 on CPU processes, 1 on GPUs). Where processes "
                                                  "share cores, a job's figures move together with where the OS "
                                                  "put its processes (2-7% of a layout's prediction), which "
                                                  "repeats inside one job do not remove"),
    keep_jobs: bool = typer.Option(False, "--keep-jobs",
                                   help="with --nproc: also write each in-group job's own profile beside OUT "
                                        "(model.json -> model-job1.json .. model-jobK.json), to see how far "
                                        "apart the jobs measured and what each alone predicts"),
    as_json: bool = typer.Option(False, "--json", help="print {out, layers, params, block: {...}} as JSON"),
) -> None:
    """Measure each layer kind's forward/backward time, parameter, saved-activation and boundary bytes.

    Mixed precision (bf16, fp16) is measured as the executor trains it: fp32 parameters, forward under
    torch.autocast."""
    from autoplan.jsonio import refuse_directory
    from autoplan.profile.layers import default_precision, profile_model
    refuse_directory(out, option="--out", what="the model profile file", example="model.json")   # before minutes
    precision = precision or default_precision(device)
    worlds = int_list(nproc, "--nproc") if nproc is not None else ()
    for given, what in ((group_jobs is not None, "--group-jobs repeats the measurement inside process groups"),
                        (keep_jobs, "--keep-jobs keeps each in-group job's own profile")):
        if given and not worlds:
            from autoplan.errors import InputError
            raise InputError(f"{what}: give --nproc N too")
    mbs_list = int_list(mbs, "--mbs")
    with progress("profiling layers") as update:
        prof = profile_model(model, mbs_list=mbs_list, tp_list=int_list(tp, "--tp"),
                             seq_len=seq_len, device=device, repeats=repeats, warmup=warmup, threads=threads,
                             precision=precision, progress=lambda e: update(e.done, e.total, e.what))
    if worlds:
        from autoplan.execute.group_profile import (GroupProfileConfig, default_group_jobs, job_profile_path,
                                                   profile_groups_into)
        group_jobs = group_jobs or default_group_jobs()
        cfg = GroupProfileConfig(spec=model, mbs_list=mbs_list, seq_len=prof.seq_len, warmup=warmup,
                                 precision=precision)
        job_profiles = [copy.deepcopy(prof) for _ in range(group_jobs)] if keep_jobs else None
        for world in worlds:
            with progress(f"in groups of {world} processes") as update:
                profile_groups_into(prof, cfg, world, progress=update, jobs=group_jobs, job_profiles=job_profiles)
        for j, one in enumerate(job_profiles or [], start=1):
            one.save(job_profile_path(out, j))
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
    if worlds:
        from autoplan.execute.group_profile import job_spread_line
        summary += (f"; in groups of {', '.join(map(str, worlds))} processes"
                    + (f", each figure the median of {group_jobs} jobs" if group_jobs > 1 else ""))
        if keep_jobs:
            names = [job_profile_path(out, j).name for j in (1, group_jobs)]
            summary += f"; each job's own profile in {names[0]}" + (f" .. {names[1]}" if group_jobs > 1 else "")
        for world in worlds:
            spread = job_spread_line(prof, world)
            if spread:
                summary += (f"\n  on {world} processes {spread}: expect step-time errors of that order on this "
                            "machine, whatever the cost model")
    typer.echo(summary)


@app.command("cluster")
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
    from autoplan.jsonio import refuse_directory
    from autoplan.profile.links import measure_cluster
    refuse_directory(out, option="--out", what="the cluster profile file", example="cluster.json")
    with progress("profiling links", enabled=nproc is not None and nproc > 1) as update:
        cl = measure_cluster(nproc, out_path=out, device=device, memory_per_device_bytes=parse_bytes(memory_per_device),
                             max_size_bytes=parse_bytes(max_size), repeats=repeats,
                             progress=lambda e: update(e.done, e.total, e.what))
    if cl is None:      # a worker of a torchrun job other than rank 0: rank 0 writes and reports
        return
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
