"""Fine-tune a Hugging Face checkpoint on your own token file, laid out as the plan says.

    autoplan tokenize corpus.txt --tokenizer ckpt/ --model hf:ckpt --out corpus.bin
    autoplan solve --model hf:ckpt --cluster cluster.json --global-batch 16 --out plan.json
    autoplan run plan.json -- examples/finetune_hf.py --data corpus.bin --steps 200 --eval-every 50 --ckpt-dir runs
    autoplan export-weights runs --plan plan.json --to-hf tuned/

The plan's model (``training.model_spec``, ``hf:DIR``) is built on the meta device and each rank reads
only its own shards of the checkpoint's weights (:mod:`autoplan.models.hf_weights`); a preset (``hf:NAME``)
or another spec starts from its random initialisation. Batches come from ``--data`` (a ``.bin``/``.npy``
token file, several separated by commas, or a directory of them; see :mod:`autoplan.execute.token_data`):
every DP rank reads its own windows, pipeline stages only what they use. With ``--eval-every K`` the last
``--val-fraction`` of the corpus is held out and the mean loss over ``--eval-batches`` global batches of it
is printed every K steps and after the last step.

With ``--ckpt-dir`` the model, the optimizer and the data position are saved every ``--ckpt-every`` steps
and after the last one, and a start that finds a checkpoint there resumes from it: the token stream
continues where it stopped (the position is in the checkpoint). ``--fail-at-step N`` (tests) makes rank 1
exit with code 1 at step N on torchrun's first attempt.

Rank 0 prints one line per step as ``examples/train_gpt.py`` does, and the evaluations:

    step 0 loss 4.861023 time_s 0.0312
    eval step 1 val_loss 4.702117
    ...
    median_step_time_s 0.0301

Bad input (a plan the checkpoint's config cannot divide, a missing shard, a corpus shorter than one
batch, token ids beyond the vocabulary, a corpus tokenized for another vocabulary) ends with one
``error: ...`` line and exit code 2, before any process group is formed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

if __name__ == "__main__":     # a signal while torch imports ends the worker quietly (see launch.py)
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import torch
import torch.distributed as dist

from autoplan.errors import InputError, LayoutError
from autoplan.execute.token_data import TokenBatches, TokenCorpus
from autoplan.models.registry import build_model_from_spec, model_vocab
from autoplan.plan.plan import Plan

DEFAULT_LR = {"sgd": 0.01, "adamw": 1e-4}
"""fine-tuning rates: a tenth of a from-scratch run's"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--plan", required=True, help="plan JSON written by `autoplan solve --model hf:DIR`")
    p.add_argument("--data", required=True, help="token file(s): .bin/.npy, comma-separated, or a directory")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default="adamw")
    p.add_argument("--lr", type=float, default=None, help="default: 1e-4 for adamw, 0.01 for sgd")
    p.add_argument("--eval-every", type=int, default=0, help="validation loss every K steps (0: never)")
    p.add_argument("--eval-batches", type=int, default=4, help="global batches of the validation split per eval")
    p.add_argument("--val-fraction", type=float, default=None,
                   help="share of the corpus held out for validation (default 0.05 with --eval-every, else 0)")
    p.add_argument("--seed", type=int, default=0, help="data order (and the init of a model without weights)")
    p.add_argument("--ckpt-dir", default=None, help="save checkpoints here; resume from the latest one in it")
    p.add_argument("--ckpt-every", type=int, default=0, help="save every K steps (0: only after the last step)")
    p.add_argument("--fail-at-step", type=int, default=None,
                   help="test only: rank 1 exits with code 1 at this step on the first torchrun attempt")
    return p.parse_args(argv)


@dataclass
class Job:
    """What every rank checks and builds before the process group exists (so all fail alike)."""

    plan: Plan
    model: torch.nn.Module
    """on the meta device when its weights come from a checkpoint (``model.checkpoint_weights``)"""
    data: TokenBatches


def prepare(args: argparse.Namespace) -> Job:
    """Check the arguments, the plan, the checkpoint and the corpus; build the (meta) model."""
    for name in ("steps", "eval_every", "ckpt_every", "eval_batches"):
        if getattr(args, name) < 0:
            raise InputError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    plan = Plan.load(args.plan)
    layout, training = plan.layout, plan.training
    if training.global_batch != layout.global_batch:
        raise LayoutError(f"plan global batch {training.global_batch} != dp*mbs*num_microbatches "
                          f"{layout.global_batch}")
    model = build_model_from_spec(training.model_spec, training.shape, seed=args.seed, load_weights=True)
    shape = getattr(model, "shape", None)
    from autoplan.execute.apply import check_launch

    check_launch(layout, world_size=int(os.environ.get("WORLD_SIZE", layout.world_size)),
                 unit_names=model.unit_names(), heads=getattr(shape, "heads", None),
                 kv_heads=getattr(shape, "kv_heads", None), ffn_hidden=getattr(shape, "ffn_hidden", None),
                 precision=training.precision)
    val = args.val_fraction if args.val_fraction is not None else (0.05 if args.eval_every else 0.0)
    corpus = TokenCorpus.open(args.data, vocab=model_vocab(model))
    data = TokenBatches(corpus, seq_len=training.seq_len, global_batch=layout.global_batch, val_fraction=val,
                        seed=args.seed)
    return Job(plan=plan, model=model, data=data)


def train(args: argparse.Namespace) -> None:
    from autoplan.execute.apply import parallelize
    from autoplan.execute.checkpoint import load, read_extra_state, save
    from autoplan.execute.launch import init_process_group

    job = prepare(args)                       # every check before any collective
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # set by torchrun
    init_process_group("nccl" if use_cuda else "gloo")
    par = parallelize(job.model, job.plan)    # reads this rank's shards of the checkpoint
    opt_cls = torch.optim.SGD if args.optimizer == "sgd" else torch.optim.AdamW
    opt = opt_cls(par.parameters(), lr=args.lr if args.lr is not None else DEFAULT_LR[args.optimizer])
    master = dist.get_rank() == 0
    data = job.data
    rank_data = dict(dp_rank=par.dp_rank, dp_size=par.dp_size, inputs=par.is_first_stage, labels=par.is_last_stage)

    start = 0
    if args.ckpt_dir is not None:
        resumed = load(par, opt, args.ckpt_dir)
        if resumed is not None:
            start = resumed
            state = read_extra_state(args.ckpt_dir)
            if state is None or "data" not in state:
                raise InputError(f"{args.ckpt_dir}: the checkpoint holds no data position (not written by this script)")
            data.load_state(state["data"])
            if master:
                print(f"resumed from step {start} ({args.ckpt_dir}), {data.consumed_samples} samples consumed",
                      flush=True)
    first_attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0

    def evaluate(step: int) -> None:
        batches = data.val_batches(args.eval_batches, **rank_data)
        if batches:
            val = statistics.fmean(par.eval_loss(x, y) for x, y in batches)
            if master:
                print(f"eval step {step} val_loss {val:.6f}", flush=True)

    save_after = {args.steps, *range(args.ckpt_every, args.steps, args.ckpt_every or args.steps + 1)}
    step_times = []
    for step in range(start, args.steps):
        if step == args.fail_at_step and first_attempt and dist.get_rank() == 1:
            print(f"rank 1: injected failure at step {step}", file=sys.stderr, flush=True)
            os._exit(1)
        tokens, labels = data.next_train_batch(**rank_data)           # [mbs * m, s] each
        t0 = time.perf_counter()
        loss = par.train_step(tokens, labels, opt)
        dt = time.perf_counter() - t0
        step_times.append(dt)
        if master:
            print(f"step {step} loss {loss:.6f} time_s {dt:.4f}", flush=True)
        done = step + 1
        if args.eval_every and (done % args.eval_every == 0 or done == args.steps):
            evaluate(done)
        if args.ckpt_dir is not None and done in save_after:
            save(par, opt, done, args.ckpt_dir, extra_state={"data": data.state()})   # with the data position
    median_s = statistics.median(step_times) if step_times else 0.0
    if master:
        print(f"median_step_time_s {median_s:.6f}", flush=True)


if __name__ == "__main__":
    from autoplan.execute.launch import exit_worker, run_worker

    cli_args = parse_args(sys.argv[1:])
    exit_worker(run_worker(lambda: train(cli_args)))   # AutoplanError -> one `error:` line, exit 2
