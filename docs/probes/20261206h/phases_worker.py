"""Probes 20261206h, the level probe's worker (run under torchrun by phases.py): one plan built as validate's
measure builds it (autoplan.execute.measure._trainer), then rounds of three ways to time a step, in turn:

  measure   par.step (forward, backward, the loss all-reduced and waited for), optimizer step, zero_grad: what
            validate times; its two phases timed apart (fb: par.step; opt: the rest), each the slowest rank's
  train     par.train_step: the loss all-reduce overlaps the optimizer step (what examples/train_gpt.py runs)
  fb_only   par.step, gradients dropped, no optimizer step

Rank 0 writes {"measure": [...], "fb": [...], "opt": [...], "train": [...], "fb_only": [...]} (seconds per round).
"""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from autoplan.execute.data import synthetic_batch
from autoplan.execute.launch import exit_worker, run_worker
from autoplan.execute.measure import _init, _timed_step, _trainer
from autoplan.models.registry import model_vocab
from autoplan.plan.plan import Plan


def slowest(x: float, device) -> float:
    """The largest of every rank's ``x`` (a phase's seconds)."""
    t = torch.tensor([x], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


@dataclass
class Launched:
    """One plan in this launch, built as validate's measure builds it (``measure._trainer``)."""

    plan: Plan
    use_cuda: bool
    par: object
    """the Parallelized model"""
    opt: torch.optim.Optimizer
    rows: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
    """this rank's (tokens, labels) of step i, as validate's measure feeds them"""
    one_step: Callable[[int], float]
    """validate's measure step on batch i (``measure._trainer``'s own: ``par.step``, the optimizer step, ``zero_grad``)"""


def launched(plan_path: str) -> Launched:
    """The plan at ``plan_path``, initialised and built in this (torchrun) worker (:class:`Launched`)."""
    from autoplan.models.source import resolve_plan_model
    plan = Plan.load(plan_path)
    use_cuda = _init()
    par, opt, one_step = _trainer(plan, 0)
    lay, tr = plan.layout, plan.training
    vocab = model_vocab(resolve_plan_model(tr.model_spec, tr.shape).build(0))

    def rows(i):
        tok, lab = synthetic_batch(i, lay.global_batch, tr.seq_len, vocab, 0)
        return par.batch_slice(tok), par.batch_slice(lab)
    return Launched(plan, use_cuda, par, opt, rows, one_step)


def add_worker_args(ap: argparse.ArgumentParser) -> None:
    """The options every probe worker of this kind takes: --plan, --rounds, --warmup, --out."""
    ap.add_argument("--plan", required=True)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)


def launch_worker(plan_path, out, label: str, args=(), worker: str = __file__, timeout_s: float = 900,
                  tail_chars: int = 800) -> dict | None:
    """Run ``worker`` (this file by default) on the plan at ``plan_path`` under torchrun, writing ``out``: what it
    wrote, or None after printing ``label: failed (code): <the end of its output>``."""
    import os
    import subprocess

    from autoplan.execute.launch import torchrun_command
    p = subprocess.run(torchrun_command(plan_path, worker, ["--out", str(out), *args]), capture_output=True, text=True,
                       timeout=timeout_s)
    if p.returncode != 0 or not os.path.exists(out):
        print(f"{label}: failed ({p.returncode}): {(p.stderr or p.stdout)[-tail_chars:]}")
        return None
    with open(out) as f:
        return json.load(f)


def main() -> int:
    ap = argparse.ArgumentParser()
    add_worker_args(ap)
    a = ap.parse_args()

    def body() -> None:
        run = launched(a.plan)
        use_cuda, par, opt, rows = run.use_cuda, run.par, run.opt, run.rows
        out = {k: [] for k in ("measure", "fb", "opt", "train", "fb_only")}
        for i in range(a.warmup + a.rounds):
            # measure, its two phases apart
            tok, lab = rows(i)
            dist.barrier()
            t0 = time.perf_counter()
            par.step(tok, lab)
            t1 = time.perf_counter()
            par.optimizer_step(opt)
            par.after_optimizer_step()
            opt.zero_grad(set_to_none=True)
            t2 = time.perf_counter()
            m, fb, op = slowest(t2 - t0, par.device), slowest(t1 - t0, par.device), slowest(t2 - t1, par.device)
            # train_step: the loss all-reduce overlapping the optimizer step
            tok, lab = rows(i)
            _, tr_s = _timed_step(lambda _: par.train_step(tok, lab, opt), i, use_cuda, par.device)
            # forward and backward only
            tok, lab = rows(i)
            _, fo = _timed_step(lambda _: (par.step(tok, lab), par.zero_grad()), i, use_cuda, par.device)
            if i >= a.warmup:
                for k, v in (("measure", m), ("fb", fb), ("opt", op), ("train", tr_s), ("fb_only", fo)):
                    out[k].append(v)
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump(out, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
