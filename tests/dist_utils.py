"""Run a function on N gloo CPU processes with a hard timeout; collect each rank's return value.

    results = run_on_ranks(worker, world_size=4, args=(cfg,), timeout_s=120)   # [rank0, rank1, ...]

``worker(rank, world_size, *args)`` runs inside an initialised gloo process group, one CPU thread
per process. A hung collective, a crash or an exception on any rank fails the caller with the
ranks' tracebacks, instead of hanging the test session.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any


class DistributedTestError(RuntimeError):
    """A rank raised, died, or the job ran past its timeout."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn: Callable[..., Any], rank: int, world_size: int, port: int, args: tuple, out: mp.Queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world_size)
        try:
            result = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        # Plain pickle bytes: tensors travel by value, not as shared-memory handles that die with us.
        out.put((rank, True, pickle.dumps(result)))
    except BaseException:  # report anything, including SystemExit, to the parent, then exit
        out.put((rank, False, traceback.format_exc()))


def run_on_ranks(fn: Callable[..., Any], world_size: int, args: tuple = (), timeout_s: float = 120.0) -> list[Any]:
    """``[fn(0, world_size, *args), ..., fn(world_size - 1, ...)]``, each on its own spawned process."""
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world_size, port, args, out), daemon=True)
             for r in range(world_size)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    errors: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(results) + len(errors) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DistributedTestError(f"timed out after {timeout_s:.0f}s; ranks done: {sorted(results)}, "
                                           f"failed: {sorted(errors)}" + _fmt(errors))
            try:
                rank, ok, value = out.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [r for r, p in enumerate(procs)
                        if p.exitcode is not None and r not in results and r not in errors]
                if dead and out.empty():
                    time.sleep(0.5)  # let a rank's last message arrive
                    if out.empty():
                        raise DistributedTestError(f"ranks {dead} exited without a result" + _fmt(errors))
                continue
            if ok:
                results[rank] = pickle.loads(value)
            else:
                errors[rank] = value
            if errors:
                # One failure usually leaves the others blocked in a collective: stop now.
                raise DistributedTestError(f"rank(s) {sorted(errors)} failed" + _fmt(errors))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=10)
    return [results[r] for r in range(world_size)]


def _fmt(errors: dict[int, str]) -> str:
    return "".join(f"\n--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items()))


def _jobs_entry(rank: int, world_size: int, jobs: list[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    return [fn(rank, world_size, *args) for fn, args in jobs]


def run_jobs_on_ranks(jobs: dict[Any, tuple[Callable[..., Any], tuple]], world_size: int, timeout_s: float
                      ) -> dict[Any, list[Any]]:
    """Several workers in turn in ONE spawned job of ``world_size`` processes (start-up paid once):
    ``{key: [fn(0, world_size, *args), ...]}`` for each ``key: (fn, args)`` of ``jobs``."""
    per_rank = run_on_ranks(_jobs_entry, world_size, args=(list(jobs.values()),), timeout_s=timeout_s)
    return {key: [r[i] for r in per_rank] for i, key in enumerate(jobs)}


# --- training equivalence: a layout against one process on the full batch ------------------------

def even_stages(n_layers: int, chunks: int) -> list[list[str]]:
    """Units ``embed, block.0.., head`` cut into ``chunks`` contiguous, near-equal stages."""
    units = ["embed"] + [f"block.{i}" for i in range(n_layers)] + ["head"]
    bounds = [round(i * len(units) / chunks) for i in range(chunks + 1)]
    return [units[bounds[i]:bounds[i + 1]] for i in range(chunks)]


def build_test_model(model: dict | str, seed: int) -> tuple[Any, int, int]:
    """``(module, vocab, seq_len)`` of ``model``: a transformer shape dict (the built-in model) or a
    model spec string such as ``"hf:llama-tiny"``."""
    from autoplan.models.registry import build_model_from_spec, model_seq_len, model_vocab
    from autoplan.models.transformer import ModelShape, build_model

    if isinstance(model, dict):
        s = ModelShape.from_dict(model)
        return build_model(s, seed=seed), s.vocab, s.seq_len
    module = build_model_from_spec(model, None, seed)
    return module, model_vocab(module), model_seq_len(module)


def reference_run(model: dict | str, *, global_batch: int, steps: int, lr: float, seed: int
                  ) -> tuple[list[float], dict[str, Any]]:
    """One process, full global batch, SGD: ``(loss per step, gradients of step 0 by name)``;
    ``model`` as in :func:`build_test_model`."""
    module, vocab, seq_len = build_test_model(model, seed)
    return train_reference(module, vocab=vocab, seq_len=seq_len, global_batch=global_batch, steps=steps, lr=lr,
                           seed=seed)


def train_reference(model: Any, *, vocab: int, seq_len: int, global_batch: int, steps: int, lr: float, seed: int
                    ) -> tuple[list[float], dict[str, Any]]:
    """Train ``model`` (any unit model) in this process on the full global batch with SGD:
    ``(loss per step, gradients of step 0 by name)``."""
    import torch

    from autoplan.execute.apply import token_cross_entropy
    from autoplan.execute.data import synthetic_batch

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses, grads = [], {}
    for step in range(steps):
        tokens, labels = synthetic_batch(step, global_batch, seq_len, vocab, seed)
        loss = token_cross_entropy(model(tokens), labels)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        opt.zero_grad()
    return losses, grads


def layouts_worker(rank: int, world_size: int, model: dict | str, layouts: list[dict], steps: int, lr: float,
                   seed: int) -> dict[str, tuple[list[float], dict[str, Any]]]:
    """Train each layout for ``steps`` SGD steps from the same init and data as :func:`reference_run`;
    per layout key ``(loss per step, this rank's full gradients of step 0)``. ``model`` as in
    :func:`build_test_model`."""
    import torch

    from autoplan.execute.apply import parallelize
    from autoplan.execute.data import synthetic_batch
    from autoplan.plan.plan import Layout

    out = {}
    for d in layouts:
        layout = Layout.from_dict(d)
        module, vocab, seq_len = build_test_model(model, seed)
        par = parallelize(module, layout)
        opt = torch.optim.SGD(par.parameters(), lr=lr)
        losses, grads = [], {}
        for step in range(steps):
            tokens, labels = synthetic_batch(step, layout.global_batch, seq_len, vocab, seed)
            losses.append(par.step(par.batch_slice(tokens), par.batch_slice(labels)))
            if step == 0:
                grads = par.full_gradients()
            opt.step()
            opt.zero_grad()
        out[layout_key(d)] = (losses, grads)
    return out


def layout_key(d: dict) -> str:
    from autoplan.plan.plan import Layout

    lay = Layout.from_dict(d)
    return lay.short() + (f" stages={[len(st) for st in lay.stages]}" if lay.stages else "")


def assert_equivalent(ref: tuple[list[float], dict], got_per_rank: list[tuple[list[float], dict]],
                      *, loss_rtol: float = 1e-5, rtol: float = 1e-4, atol: float = 1e-6) -> None:
    """Losses within ``loss_rtol`` on every rank; every gradient any rank holds equals the reference;
    together the ranks hold every parameter's gradient."""
    import torch

    ref_losses, ref_grads = ref
    seen = set()
    for rank, (losses, grads) in enumerate(got_per_rank):
        for step, (a, b) in enumerate(zip(losses, ref_losses, strict=True)):
            assert abs(a - b) <= loss_rtol * abs(b), f"rank {rank} step {step}: loss {a} != reference {b}"
        for name, g in grads.items():
            assert name in ref_grads, f"rank {rank}: unexpected parameter {name}"
            torch.testing.assert_close(g, ref_grads[name], rtol=rtol, atol=atol,
                                       msg=lambda m, n=name, r=rank: f"rank {rank} grad {n}: {m}")
            seen.add(name)
    missing = set(ref_grads) - seen
    assert not missing, f"no rank returned gradients for {sorted(missing)}"
