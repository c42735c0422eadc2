"""Exploratory (README part 5): is validate's step of a pipeline intrinsically slower than the profile's run of
the same pipeline?  In one job, the same layout built twice and timed in turn, one step of each variant per round
(rotated), each behind a barrier, the slowest rank's time:

  harness      the profile's pipeline run (group_measure.measure_pipelines): split_model + build_schedule, the
               step's tokens made once, schedule.step, gradients set to None
  harness+ref  the same, each step preceded (untimed) by the whole model's forward and backward on every rank,
               then on rank 0 alone, as the profile does before each of its pipeline steps
  executor     validate's step (execute/measure.py: _trainer's one_step): par.step (waits for the loss),
               the optimizer step, zero_grad
  executor-no-opt   par.step and zero_grad only

Usage: PYTHONPATH=. python docs/probes/20261207p/executor_vs_harness.py WORKLOAD_DIR LAYOUT_INDEX [ROUNDS]
(the stored workload's shape.json, runs.json, model.json, cluster.json; LAYOUT_INDEX into runs.json's
"confirmed"); the parent launches torchrun with the workload's world size."""
import json, os, statistics as st, subprocess, sys, tempfile
from pathlib import Path


def parent(wdir: Path, index: int, rounds: int) -> None:
    from autoplan.plan.api import make_problem, estimate_problem
    from autoplan.plan.plan import Layout, SolverInfo
    d = json.load(open(wdir / "runs.json"))
    layout = Layout.from_dict(d["confirmed"][index]["layout"])
    pb = make_problem(str(wdir / "model.json"), str(wdir / "cluster.json"), d["workload"]["global_batch"])
    _, pred = estimate_problem(pb, layout)
    plan = pb.plan(layout, pred, SolverInfo(status="given", objective=pred.step_time_s, bound=0.0, wall_s=0.0))
    tmp = Path(tempfile.mkdtemp())
    plan.save(str(tmp / "plan.json"))
    out = tmp / "out.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(layout.world_size),
           __file__, "--worker", str(tmp / "plan.json"), str(rounds), str(out)]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    res = json.load(open(out))
    print(f"{wdir.name} confirmed[{index}] pp{layout.pp} vp{layout.vp} {layout.schedule} {layout.mbs}x{layout.num_microbatches} "
          f"stages {[len(s) for s in layout.stages]}: predicted {pred.step_time_s:.3f} s, measured in turn "
          f"{d['confirmed'][index]['measured']['step_time_s']:.3f} s (stored); this job, {rounds} rounds:")
    base = st.median(res["harness"])
    for name, v in res.items():
        print(f"   {name:16s} median {st.median(v):.3f} s  ({st.median(v) / base - 1:+.1%} of harness)  "
              f"first {v[0]:.3f} last {v[-1]:.3f}")


def worker(plan_path: str, rounds: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from autoplan.execute.apply import token_cross_entropy
    from autoplan.execute.measure import _init, _timed_step, _trainer, turn_order
    from autoplan.execute.pp import build_schedule, split_model, stage_ids
    from autoplan.models.registry import model_vocab, sample_tokens
    from autoplan.models.source import resolve_plan_model
    from autoplan.plan.plan import Plan
    plan = Plan.load(plan_path)
    L, tr = plan.layout, plan.training
    _init()
    rank = dist.get_rank()
    par, opt, one_step = _trainer(plan, 0)

    def no_opt(i):
        from autoplan.execute.data import synthetic_batch
        tokens, labels = synthetic_batch(i, L.global_batch, tr.seq_len, model_vocab(par_model), 0)
        loss = par.step(par.batch_slice(tokens), par.batch_slice(labels))
        par.zero_grad()
        return loss
    par_model = resolve_plan_model(tr.model_spec, tr.shape).build(0)
    model = resolve_plan_model(tr.model_spec, tr.shape).build(0)
    ids = stage_ids(rank % L.pp, pp=L.pp, vp=L.vp)
    chunks = [c.train() for c in split_model(model, L.stages, ids)]
    sched = build_schedule(chunks, ids, num_stages=L.pp * L.vp, schedule=L.schedule, n_microbatches=L.num_microbatches,
                           loss_fn=token_cross_entropy, device=torch.device("cpu"), group=dist.group.WORLD)
    vocab = model_vocab(model)
    tokens = sample_tokens(vocab, L.mbs * L.num_microbatches, tr.seq_len, 1)
    labels = sample_tokens(vocab, L.mbs * L.num_microbatches, tr.seq_len, 1001)
    first, last = 0 in ids, L.pp * L.vp - 1 in ids
    whole = resolve_plan_model(tr.model_spec, tr.shape).build(0)
    wt = sample_tokens(vocab, L.mbs, tr.seq_len, 7 + rank)

    def harness(i):
        sched.step(*((tokens,) if first else ()), target=labels if last else None, losses=[], return_outputs=False)
        for c in chunks:
            for p in c.parameters():
                p.grad = None
        return 0.0

    def ref_then_harness_setup(i):
        token_cross_entropy(whole(wt), wt).backward()
        whole.zero_grad(set_to_none=True)
        dist.barrier()
        if rank == 0:
            token_cross_entropy(whole(wt), wt).backward()
            whole.zero_grad(set_to_none=True)
        dist.barrier()
    variants = {"harness": (None, harness), "harness+ref": (ref_then_harness_setup, harness),
                "executor": (None, one_step), "executor-no-opt": (None, no_opt)}
    names = list(variants)
    times = {n: [] for n in names}
    for i in range(2 + rounds):
        for k in turn_order(len(names), i):
            setup, step = variants[names[k]]
            if setup is not None:
                setup(i)
            _, dt = _timed_step(step, i, False, torch.device("cpu"))
            if i >= 2:
                times[names[k]].append(dt)
    if rank == 0:
        json.dump(times, open(out, "w"))
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        parent(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 12)
