"""Apply a plan's layout to a model: the one documented order.

Inside an initialised process group (``torchrun``, or spawned workers)::

    model = build_model(BUILTIN_SHAPES["gpt-tiny"], seed=0)
    par = autoplan.parallelize(model, Plan.load("plan.json"))
    opt = torch.optim.SGD(par.parameters(), lr=0.1)
    tokens, labels = synthetic_batch(step, global_batch, seq_len, vocab)   # [B, s] each
    loss = par.step(par.batch_slice(tokens), par.batch_slice(labels))      # same float on all ranks
    par.optimizer_step(opt); opt.zero_grad()                               # fp16: loss scaling

Order of application:

0. **validate** (no collective, so every rank fails alike): world size, stage unit names,
   TP degree against heads/KV heads/MLP width, micro-batch count against the schedule.
1. **mesh** ``(pp, dp, cp, tp)``, tp innermost (:mod:`autoplan.execute.mesh`; no cp dim when cp = 1).
2. **pipeline split** (:mod:`autoplan.execute.pp`): deep-copy the model once per chunk this rank owns
   and delete the units it does not (the caller's model is never changed).
3. per chunk, **context parallel** when ``cp > 1`` (:mod:`autoplan.execute.cp`): every attention core
   exchanges K/V over the cp group, position-using modules get the rank's global positions,
   then **tensor parallel** on every block (:mod:`autoplan.execute.tp`; sequence parallel
   when ``sp == 1``),
4. then **activation recompute** per block (:mod:`autoplan.models.recompute`),
5. then **data parallel** (:mod:`autoplan.execute.dp`) over ``dp`` (``dp x cp`` when ``cp > 1``):
   DDP (ZeRO-0 without TP or PP), else ``fully_shard`` per block then root.
6. **pipeline schedule** over the chunks (``gpipe | 1f1b | interleaved``).

A model built on the meta device with a checkpoint to read (``hf:DIR``, ``model.checkpoint_weights``)
goes through 2-5 holding no storage; each chunk is then allocated and its local shards read from the
checkpoint (:mod:`autoplan.models.hf_weights`): after step 4 when DDP or no DP follows (DDP broadcasts
whole parameters when it wraps), after step 5 under ``fully_shard`` (each rank allocates its shard only).

Precision (the plan's ``training.precision``): ``fp32``, or mixed ``bf16`` / ``fp16`` with fp32
weights, gradients and optimizer state. Where the layout uses ``fully_shard`` that is FSDP2's
``MixedPrecisionPolicy`` (compute in the 16-bit type, gradient reduction in fp32); elsewhere (DDP,
or no DP) :meth:`Parallelized.step` runs under ``torch.autocast``. fp16 adds dynamic loss scaling
(:class:`~autoplan.execute.scaler.LossScaler`): :meth:`Parallelized.step` scales each micro-batch loss
before its backward and :meth:`Parallelized.optimizer_step` unscales, skips a step with inf/NaN
gradients on any rank, and updates the scale; the loss it returns is unscaled.

Loss and gradients: the loss is the mean token cross-entropy over the whole global batch
(``dp * mbs * num_microbatches`` rows). Each micro-batch loss is a mean over its tokens; micro-batches
are averaged (``1 / num_microbatches`` on each backward, or the schedule's ``scale_grads``) and DP
averages over ranks, so the gradients equal those of one process on the full batch. Under context
parallel every cp rank of a DP group gets the same rows and :meth:`Parallelized.step` keeps its
share of each sequence (tokens and labels cut alike); its loss is the mean over those tokens and
gradients are averaged over ``dp x cp``, which is again the full-batch gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from autoplan.profile.formats import is_fp8
from autoplan.errors import InputError, LaunchError, LayoutError
from autoplan.execute.cp import apply_cp, check_context_parallel, torch_ring_available
from autoplan.execute.data import dp_slice
from autoplan.execute.dp import apply_dp, reshards_after_forward, set_gradient_sync, use_ddp
from autoplan.execute.fp8 import check_fp8, compile_blocks, convert_to_fp8
from autoplan.execute.mesh import ParallelMesh, build_mesh
from autoplan.execute.pp import build_schedule, split_model, stage_ids
from autoplan.models.recompute import apply_recompute, canonical_name
from autoplan.execute.scaler import LossScaler
from autoplan.execute.tp import apply_tp
from autoplan.models.attention import SequenceShard
from autoplan.models.transformer import REFERENCE_TP_PLAN
from autoplan.plan.plan import Layout, Plan, sequence_split_violation
from autoplan.plan.schedules import check_schedule

if TYPE_CHECKING:        # torch.distributed.pipelining is imported only for a pipelined plan (execute/pp.py)
    from torch.distributed.pipelining.schedules import PipelineScheduleMulti, PipelineScheduleSingle

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

COMPUTE_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16,
                  "fp8-rowwise": torch.bfloat16}
"""training precision -> the 16-bit compute dtype of mixed precision (``None``: plain fp32)"""


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over tokens: logits ``[b, s, vocab]``, labels int64 ``[b, s]`` -> scalar."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


@dataclass
class PendingLoss:
    """The global mean loss of one step, whose all-reduce may still be running."""

    total: torch.Tensor
    """float64 scalar: the sum of every last-stage rank's micro-batch mean losses once ``work`` is done"""
    work: dist.Work
    """the in-place all-reduce of ``total`` over every rank"""
    count: int
    """how many micro-batch means are summed: ``num_microbatches * dp * cp * tp``"""

    def value(self) -> float:
        """The loss (waits for the all-reduce; the same float on every rank)."""
        self.work.wait()
        return float(self.total) / self.count


@dataclass
class Parallelized:
    """A model laid out by :func:`parallelize`, from the point of view of one rank."""

    modules: list[nn.Module]
    """this rank's chunks (one per virtual stage; the whole model without PP), parallelized in place"""
    runners: list[nn.Module]
    """what is called per chunk: the DDP wrapper, or the chunk itself"""
    mesh: ParallelMesh
    layout: Layout
    loss_fn: LossFn
    device: torch.device
    schedule: PipelineScheduleSingle | PipelineScheduleMulti | None = None
    """the pipeline schedule; ``None`` without PP"""
    stage_ids: list[int] = field(default_factory=list)
    """global chunk index of each of :attr:`modules`"""
    autocast_dtype: torch.dtype | None = None
    """16-bit dtype :meth:`step` runs under ``torch.autocast``; ``None`` when fp32 or FSDP2 mixed precision"""
    averager: object | None = None
    """local SGD (``layout.sync_every > 1``): averages parameters over dp every ``sync_every`` steps"""
    grad_scaler: LossScaler | None = None
    """fp16: the dynamic loss scaler (``None`` for fp32 and bf16, which need none)"""
    sequence_shard: SequenceShard | None = None
    """context parallel (``cp > 1``): the share of every sequence this rank trains on"""

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``; under fp16, through the loss scaler: gradients unscaled, the step
        skipped (on every rank alike) when any rank's gradients hold an inf or NaN, the scale updated."""
        if self.grad_scaler is None:
            optimizer.step()
            return
        self.grad_scaler.step(optimizer)
        self.grad_scaler.update()

    def train_step(self, tokens: torch.Tensor, labels: torch.Tensor, optimizer: torch.optim.Optimizer) -> float:
        """One whole training step on this rank's rows (arguments as for :meth:`step`): forward and
        backward, :meth:`optimizer_step` while the loss is all-reduced, :meth:`after_optimizer_step`,
        gradients cleared; returns the global mean loss."""
        pending = self.step_async(tokens, labels)
        self.optimizer_step(optimizer)
        self.after_optimizer_step()
        optimizer.zero_grad(set_to_none=True)
        return pending.value()

    def after_optimizer_step(self) -> None:
        """Call after each optimizer step: under local SGD, averages the parameters over the data
        parallel group every ``sync_every`` steps (a no-op otherwise)."""
        if self.averager is not None:
            self.averager.average_parameters(list(self.parameters()))

    # -- where this rank sits ------------------------------------------------------------------
    @property
    def dp_rank(self) -> int:
        return self.mesh.rank("dp")

    @property
    def dp_size(self) -> int:
        return self.mesh.dp

    @property
    def rows_per_rank(self) -> int:
        """Rows of one step on one DP rank: ``mbs * num_microbatches``."""
        return self.layout.mbs * self.layout.num_microbatches

    @property
    def is_first_stage(self) -> bool:
        """Feeds tokens (owns chunk 0)."""
        return 0 in self.stage_ids

    @property
    def is_last_stage(self) -> bool:
        """Computes the loss (owns the last chunk)."""
        return self.mesh.pp * self.layout.vp - 1 in self.stage_ids if self.mesh.pp_enabled else True

    def batch_slice(self, global_batch: torch.Tensor) -> torch.Tensor:
        """This DP rank's rows of a global batch ``[dp * mbs * num_microbatches, ...]`` (the same on
        every cp rank of the DP group: :meth:`step` takes each one's share of the sequence)."""
        return dp_slice(global_batch, dp_rank=self.dp_rank, dp_size=self.dp_size)

    def parameters(self) -> Iterator[nn.Parameter]:
        """Parameters of this rank's chunks (DTensor shards under TP/FSDP), for the optimizer."""
        for m in self.modules:
            yield from m.parameters()

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Like :meth:`parameters`, with the unsplit model's names (wrapper infixes removed)."""
        for m in self.modules:
            for name, p in m.named_parameters():
                yield canonical_name(name), p

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # -- one step -----------------------------------------------------------------------------
    def step(self, tokens: torch.Tensor, labels: torch.Tensor) -> float:
        """Forward and backward of one step on this rank's rows; returns the global mean loss.

        ``tokens``, ``labels``: int64 ``[mbs * num_microbatches, s]``, this DP rank's slice (every
        rank of a DP group passes the same; the first PP stage uses the tokens, the last the labels).
        Under context parallel both are cut to this rank's share of each sequence here, so ``s``
        must divide by ``2 * cp`` (:class:`InputError` otherwise, on every rank alike).
        Gradients are left in the parameters (accumulated onto any present), for the optimizer.
        Waits for the loss's all-reduce over every rank; :meth:`step_async` lets the optimizer step
        run first.
        """
        return self.step_async(tokens, labels).value()

    def step_async(self, tokens: torch.Tensor, labels: torch.Tensor) -> PendingLoss:
        """:meth:`step`, returning before the loss is reduced over the ranks::

            loss = par.step_async(tokens, labels)
            opt.step(); opt.zero_grad()
            print(loss.value())          # the same float step() returns

        The loss is one all-reduce over every rank. Waiting for it before the optimizer step would
        make every rank wait for the slowest (under PP, the last stage waits for the first stage's
        final backward) before it may step; started here and waited on later, it costs nothing on
        the critical path.
        """
        tokens, labels = self._local_rows(tokens, labels)
        with torch.autocast(self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None):
            loss_sum, reduced = self._forward_backward(tokens, labels)
        return PendingLoss(total=loss_sum, work=reduced, count=self._loss_count)

    def _local_rows(self, tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Check a step's ``[mbs * num_microbatches, s]`` rows; keep this cp rank's share of the sequence;
        move them to the device."""
        for name, t in (("tokens", tokens), ("labels", labels)):
            if t.dim() != 2 or t.shape[0] != self.rows_per_rank:
                raise InputError(f"step: {name} must be [mbs*num_microbatches={self.rows_per_rank}, seq], "
                                 f"got {list(t.shape)}")
        if self.sequence_shard is not None:
            tokens, labels = self.sequence_shard.take(tokens, dim=1), self.sequence_shard.take(labels, dim=1)
        return tokens.to(self.device), labels.to(self.device)

    @property
    def _loss_count(self) -> int:
        """How many micro-batch means the all-reduced loss sum holds: every last-stage rank (dp * cp * tp of
        them) adds its n micro-batch means (under cp each a mean over its share of the tokens; the shares
        are equal)."""
        return self.layout.num_microbatches * self.mesh.dp * self.mesh.cp * self.mesh.tp

    def _forward_backward(self, tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, dist.Work]:
        """Run the step's micro-batches: ``(this rank's sum of micro-batch mean losses, its all-reduce)``.

        The sum (0 off the last PP stage) is all-reduced in place over the world, asynchronously,
        once the backward is done (started during the last backward it would compete with the DP
        gradient reduction), so that it runs during the optimizer step.
        """
        n = self.layout.num_microbatches
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        if self.schedule is None:
            runner = self.runners[0]
            sync = self.layout.sync_every == 1       # local SGD: gradients are never averaged
            for i, (t, y) in enumerate(zip(tokens.chunk(n), labels.chunk(n))):
                if n > 1 or not sync:
                    set_gradient_sync(runner, sync and i == n - 1,
                                      reshard_after_backward=reshards_after_forward(self.layout.zero) or i == n - 1)
                loss = self.loss_fn(runner(t), y)
                scaled = loss if self.grad_scaler is None else self.grad_scaler.scale(loss)
                (scaled / n).backward()
                loss_sum += loss.detach()
        else:
            losses: list[torch.Tensor] = []
            args = (tokens,) if self.is_first_stage else ()
            target = labels if self.is_last_stage else None
            # return_outputs=False: the last stage does not keep every micro-batch's logits
            # until the step ends (only the losses are needed)
            self.schedule.step(*args, target=target, losses=losses, return_outputs=False)
            scale = 1.0 if self.grad_scaler is None else self.grad_scaler.get_scale()  # the schedule's losses are scaled
            for loss in losses:
                loss_sum += loss.detach() / scale
        return loss_sum, dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM, async_op=True)

    def eval_loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> float:
        """Forward only (no gradients, parameters unchanged) of one step's rows: the global mean loss,
        the same float on every rank. Arguments as for :meth:`step`; under PP the schedule's ``eval``."""
        n = self.layout.num_microbatches
        tokens, labels = self._local_rows(tokens, labels)
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        with torch.no_grad(), torch.autocast(self.device.type, dtype=self.autocast_dtype,
                                             enabled=self.autocast_dtype is not None):
            if self.schedule is None:
                for t, y in zip(tokens.chunk(n), labels.chunk(n)):
                    loss_sum += self.loss_fn(self.runners[0](t), y).double()
            else:
                losses: list[torch.Tensor] = []
                args = (tokens,) if self.is_first_stage else ()
                self.schedule.eval(*args, target=labels if self.is_last_stage else None, losses=losses)
                scale = 1.0 if self.grad_scaler is None else self.grad_scaler.get_scale()
                for loss in losses:
                    loss_sum += loss.detach().double() / scale
        dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM)
        return float(loss_sum) / self._loss_count

    # -- inspection (collectives: call on every rank) ------------------------------------------
    def full_gradients(self) -> dict[str, torch.Tensor]:
        """Gradients of this rank's chunks as full tensors, keyed by the unsplit model's names.

        DTensor gradients (TP/FSDP shards) are gathered with ``full_tensor()``: a collective over
        the stage's dp x tp ranks, so every rank must call this.
        """
        out: dict[str, torch.Tensor] = {}
        for name, p in self.named_parameters():
            if p.grad is None:
                continue
            g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
            out[name] = g.detach().cpu()
        return out


def default_device() -> torch.device:
    """``cuda:<current>`` under NCCL, else CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def check_launch(layout: Layout, *, world_size: int, unit_names: Sequence[str], heads: int | None = None,
                 kv_heads: int | None = None, ffn_hidden: int | None = None, precision: str = "fp32") -> None:
    """Refuse a layout that does not match this launch or model; runs no collective."""
    if precision not in COMPUTE_DTYPES:
        raise LayoutError(f"training precision must be one of {'|'.join(COMPUTE_DTYPES)}, got {precision!r}")
    if layout.world_size != world_size:
        raise LaunchError(f"plan needs {layout.world_formula(values=True)} = {layout.world_size} "
                          f"processes but the launch has world size {world_size}")
    if layout.stages:
        flat = [n for st in layout.stages for n in st]
        units = list(unit_names)
        if flat != units:
            i = next((i for i, (a, b) in enumerate(zip(flat, units)) if a != b), min(len(flat), len(units)))
            raise LaunchError(f"plan stages list {len(flat)} units but the model has {len(units)}; first "
                              f"difference at position {i}: plan {flat[i] if i < len(flat) else 'nothing'!r}, "
                              f"model {units[i] if i < len(units) else 'nothing'!r}")
    elif layout.pp > 1:
        raise LayoutError(f"layout with pp={layout.pp} lists no stages")
    layout.check_against(None, list(unit_names), heads=heads, kv_heads=kv_heads, ffn_hidden=ffn_hidden)
    check_schedule(layout.schedule, pp=layout.pp, vp=layout.vp, num_microbatches=layout.num_microbatches)


def parallelize(model: nn.Module, plan_or_layout: Plan | Layout, *, device: torch.device | None = None,
                loss_fn: LossFn | None = None, precision: str | None = None,
                jit_recv_buffers: bool = True) -> Parallelized:
    """Lay out ``model`` (a :class:`~autoplan.models.transformer.Transformer`, unchanged) per the plan.

    Raises :class:`LaunchError` / :class:`LayoutError` before any collective when the plan does not
    fit the launch or the model. ``loss_fn(logits [b, s, vocab], labels [b, s]) -> scalar mean``
    defaults to :func:`token_cross_entropy`. ``precision`` (``fp32|bf16|fp16``) defaults to the
    plan's ``training.precision``, and to fp32 for a bare layout. Pipeline receive buffers exist only
    while their micro-batch is in flight (:mod:`autoplan.execute.pp_buffers`, what the planner counts);
    ``jit_recv_buffers=False`` keeps torch's stock allocation, one per micro-batch for the whole step.
    """
    layout = plan_or_layout.layout if isinstance(plan_or_layout, Plan) else plan_or_layout
    if isinstance(plan_or_layout, Plan):
        plan_or_layout.check_runnable_here()
    if precision is None:
        precision = plan_or_layout.training.precision if isinstance(plan_or_layout, Plan) else "fp32"
    if not dist.is_initialized():
        raise LaunchError("parallelize needs an initialised process group: run under torchrun")
    shape = getattr(model, "shape", None)
    check_launch(layout, world_size=dist.get_world_size(), unit_names=model.unit_names(),
                 heads=getattr(shape, "heads", None), kv_heads=getattr(shape, "kv_heads", None),
                 ffn_hidden=getattr(shape, "ffn_hidden", None), precision=precision)
    seq_len = plan_or_layout.training.seq_len if isinstance(plan_or_layout, Plan) else None
    check_context_parallel(model, layout.cp, seq_len)
    why = seq_len and sequence_split_violation(seq_len, cp=layout.cp, tp=layout.tp, sp=layout.sp)
    if why:
        raise LayoutError(why)
    low = COMPUTE_DTYPES[precision]
    device = device if device is not None else default_device()
    if is_fp8(precision):
        check_fp8(device, layout.tp)
    loss_fn = loss_fn if loss_fn is not None else token_cross_entropy

    mesh = build_mesh(device.type, pp=layout.pp, dp=layout.dp, tp=layout.tp, cp=layout.cp)
    if mesh.pp_enabled:
        ids = stage_ids(mesh.rank("pp"), pp=layout.pp, vp=layout.vp)
        chunks = split_model(model, layout.stages, ids)
    else:
        ids = [0]
        chunks = split_model(model, [model.unit_names()], ids)

    tp_plan = getattr(model, "tp_plan", None) or REFERENCE_TP_PLAN   # the model's own, if it has one
    runners = []
    fsdp = mesh.grad_enabled and not use_ddp(zero=layout.zero, tp=layout.tp, pipelined=mesh.pp_enabled)
    shard = None
    # A model built on the meta device (hf:DIR with load_weights) is laid out first and then each chunk's
    # local shards are allocated and read from its checkpoint: before DDP (which broadcasts whole
    # parameters when it wraps), after fully_shard (so a rank allocates only its shard).
    weights = getattr(model, "checkpoint_weights", None)
    for chunk in chunks:
        if weights is None:
            chunk.to(device)
        if is_fp8(precision):
            convert_to_fp8(chunk, rowwise=precision == "fp8-rowwise")
        if mesh.cp_enabled:
            shard = apply_cp(chunk, mesh.get("cp"), use_torch_ring=torch_ring_available(device.type))
        if mesh.tp_enabled:
            apply_tp(list(chunk.blocks.values()), mesh.get("tp"), colwise=tp_plan.colwise, rowwise=tp_plan.rowwise,
                     sequence_parallel=bool(layout.sp), sp_norms=tp_plan.sp_norms, sp_gather=tp_plan.sp_gather)
        per_block = {k.split(".", 1)[1]: m for k, m in layout.recompute_layers.items() if k.startswith("block.")}
        if layout.recompute != "none" or per_block:
            apply_recompute(chunk.blocks, mode=layout.recompute, per_block=per_block)
        if is_fp8(precision):
            compile_blocks(chunk.blocks)    # torchao's casts fused: eager fp8 ran 0.3-0.5x of bf16 (fp8.py)
        if weights is not None and not fsdp:
            weights.materialize(chunk, device)
        if mesh.grad_enabled:
            runners.append(apply_dp(chunk, chunk.blocks, mesh.grad_mesh(), zero=layout.zero, tp=layout.tp,
                                    pipelined=mesh.pp_enabled, param_dtype=low,
                                    grad_compression=layout.grad_compression).runner)
        else:
            runners.append(chunk)
        if weights is not None and fsdp:
            weights.materialize(chunk, device)

    scaler = LossScaler(device) if precision == "fp16" else None
    schedule = None
    if mesh.pp_enabled:
        schedule_loss = loss_fn if scaler is None else (lambda out, y: scaler.scale(loss_fn(out, y)))
        schedule = build_schedule(runners, ids, num_stages=layout.pp * layout.vp, schedule=layout.schedule,
                                  n_microbatches=layout.num_microbatches, loss_fn=schedule_loss, device=device,
                                  group=mesh.group("pp"), jit_recv_buffers=jit_recv_buffers)
    averager = None
    if layout.sync_every > 1 and mesh.dp_enabled:
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        averager = PeriodicModelAverager(period=layout.sync_every, warmup_steps=0,
                                         process_group=mesh.get("dp").get_group())
    return Parallelized(modules=chunks, runners=runners, mesh=mesh, layout=layout, loss_fn=loss_fn,
                        device=device, schedule=schedule, stage_ids=ids, autocast_dtype=None if fsdp else low,
                        averager=averager, grad_scaler=scaler, sequence_shard=shard)
