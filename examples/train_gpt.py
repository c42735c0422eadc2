"""Train the plan's transformer on synthetic data, laid out as the plan says.

    autoplan run plan.json -- examples/train_gpt.py --steps 20
    torchrun --nproc-per-node 4 examples/train_gpt.py --plan plan.json --steps 20 --optimizer sgd --lr 0.1
    torchrun --max-restarts 1 --nproc-per-node 4 examples/train_gpt.py --plan plan.json --steps 20 \
        --ckpt-dir ckpt --ckpt-every 5

With ``--ckpt-dir`` the model and optimizer state are saved (torch.distributed.checkpoint, see
:mod:`autoplan.execute.checkpoint`) every ``--ckpt-every`` steps and after the last one, and a start
finding a checkpoint there resumes from it: the step count continues, and since the batch of step
``n`` is a function of ``n`` and the seed only, the data stream continues exactly as without the
interruption. The checkpoint may come from another plan of the same model. ``--fail-at-step N``
(for tests) makes rank 1 exit with code 1 when it reaches step ``N`` on torchrun's first attempt
only, so that a restart (``--max-restarts``) resumes past it.

Context-parallel plans (``cp > 1``) run as they are: every cp rank of a data-parallel group takes the
same rows and :meth:`~autoplan.execute.apply.Parallelized.step` keeps its share of each sequence
(chunks ``i`` and ``2*cp-1-i`` of ``2*cp``, tokens and labels alike); a plan whose sequence length
does not divide by ``2*cp`` ends with one ``error:`` line.

Rank 0 prints one line per step, then the summary lines (``peak_rss_bytes`` on CPU only):

    step 0 loss 5.577558 time_s 0.0412
    ...
    peak_rss_bytes 562036736
    peak_memory_bytes 41234534
    median_step_time_s 0.0398

``peak_memory_bytes`` is the largest over ranks of the most bytes of tensors alive at once, what the
plan's ``peak_memory_bytes`` predicts: on CUDA, ``torch.cuda.max_memory_allocated``; on CPU, counted
over the last step by autoplan's tensor tracker (``autoplan.profile.memory.LiveTensorTracker``, as
``autoplan validate`` measures), a step that runs slower for it and is left out of the median when
there are others. On CPU a ``peak_rss_bytes`` line before it gives the process's peak resident set
size (``getrusage`` ``ru_maxrss``), which also counts the interpreter and the torch libraries (a few
hundred MB): until 2026-12-07 that was the ``peak_memory_bytes`` printed on CPU.
A plan that does not fit the launch or the model ends with one ``error: ...`` line and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import time

if __name__ == "__main__":     # a signal while torch imports ends the worker quietly (see launch.py)
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import torch
import torch.distributed as dist

from autoplan.errors import InputError, LayoutError
from autoplan.execute.apply import parallelize
from autoplan.execute.checkpoint import load, save
from autoplan.execute.data import synthetic_batch
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.models.registry import build_model_from_spec, model_vocab
from autoplan.plan.plan import Plan
from autoplan.profile.memory import LiveTensorTracker, state_tensors

DEFAULT_LR = {"sgd": 0.1, "adamw": 1e-3}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--plan", required=True, help="plan JSON written by `autoplan solve`")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default=None,
                   help="default: the plan's (training.optimizer), sgd if it names another")
    p.add_argument("--lr", type=float, default=None, help="default: 0.1 for sgd, 1e-3 for adamw")
    p.add_argument("--seed", type=int, default=0, help="model init and data")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default=None,
                   help="default: the plan's (training.precision); bf16/fp16 are mixed precision")
    p.add_argument("--ckpt-dir", default=None, help="save checkpoints here; resume from the latest one in it")
    p.add_argument("--ckpt-every", type=int, default=0, help="save every K steps (0: only after the last step)")
    p.add_argument("--fail-at-step", type=int, default=None,
                   help="test only: rank 1 exits with code 1 at this step on the first torchrun attempt")
    return p.parse_args(argv)


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # ru_maxrss: KiB on Linux


def max_over_ranks(value: int, device: torch.device) -> int:
    t = torch.tensor(value, dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t)


def train(args: argparse.Namespace) -> None:
    plan = Plan.load(args.plan)
    layout, training = plan.layout, plan.training
    if training.global_batch != layout.global_batch:
        raise LayoutError(f"plan global batch {training.global_batch} != dp*mbs*num_microbatches "
                          f"{layout.global_batch}")
    optimizer = args.optimizer or (training.optimizer if training.optimizer in DEFAULT_LR else "sgd")
    lr = args.lr if args.lr is not None else DEFAULT_LR[optimizer]
    if args.ckpt_every < 0:
        raise InputError(f"--ckpt-every must be >= 0, got {args.ckpt_every}")

    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # set by torchrun
    init_process_group("nccl" if use_cuda else "gloo")  # prefixes the store by torchrun's restart count
    model = build_model_from_spec(training.model_spec, training.shape, seed=args.seed)  # any model spec
    vocab = model_vocab(model)
    # Refuses a plan that does not fit this launch, before any collective.
    par = parallelize(model, plan, precision=args.precision)
    opt_cls = torch.optim.SGD if optimizer == "sgd" else torch.optim.AdamW
    opt = opt_cls(par.parameters(), lr=lr)
    master = dist.get_rank() == 0

    start = 0
    if args.ckpt_dir is not None:
        resumed = load(par, opt, args.ckpt_dir)
        if resumed is not None:
            start = resumed
            if master:
                print(f"resumed from step {start} ({args.ckpt_dir})", flush=True)
    # torchrun counts restarts of the worker group; 0 on the first attempt.
    first_attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0

    step_times = []
    tensor_peak = 0           # CPU: tensors alive at once over the last step (module docstring)
    for step in range(start, args.steps):
        if step == args.fail_at_step and first_attempt and dist.get_rank() == 1:
            print(f"rank 1: injected failure at step {step}", file=sys.stderr, flush=True)
            os._exit(1)
        tokens, labels = synthetic_batch(step, layout.global_batch, training.seq_len, vocab, args.seed)
        tracked = not use_cuda and step == args.steps - 1
        tracker = LiveTensorTracker(state_tensors(par.parameters(), opt)) if tracked else contextlib.nullcontext()
        t0 = time.perf_counter()
        # this DP rank's rows [mbs*m, s] (the same on its cp ranks; step keeps each one's sequence share); the
        # optimizer step runs while the loss is all-reduced (fp16: through the loss scaler), then local SGD's
        # periodic parameter averaging (a lossy plan option)
        with tracker:
            loss = par.train_step(par.batch_slice(tokens), par.batch_slice(labels), opt)
        dt = time.perf_counter() - t0
        if tracked:
            tensor_peak = tracker.peak_bytes
        if not tracked or not step_times:
            step_times.append(dt)
        if master:
            print(f"step {step} loss {loss:.6f} time_s {dt:.4f}", flush=True)
        done = step + 1
        if args.ckpt_dir is not None and (done == args.steps or (args.ckpt_every and done % args.ckpt_every == 0)):
            save(par, opt, done, args.ckpt_dir)

    peak = max_over_ranks(torch.cuda.max_memory_allocated(par.device) if use_cuda else tensor_peak, par.device)
    rss = None if use_cuda else max_over_ranks(peak_rss_bytes(), par.device)
    if master:
        if rss is not None:
            print(f"peak_rss_bytes {rss}", flush=True)
        print(f"peak_memory_bytes {peak}", flush=True)
        print(f"median_step_time_s {statistics.median(step_times) if step_times else 0.0:.6f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_worker(lambda: train(args))   # AutoplanError -> one `error:` line, exit 2


if __name__ == "__main__":
    exit_worker(main())
