"""Mixed precision from the plan's ``training.precision``: a bf16 plan trains.

FSDP2 ``MixedPrecisionPolicy`` where the layout uses ``fully_shard`` (DP4 ZeRO-3, PP2 x DP2 ZeRO-1),
``torch.autocast`` elsewhere (DP4 under DDP, TP2 x PP2). Each layout trains 5 SGD steps in bf16 and
in fp32 from the same start on 4 gloo CPU processes: the bf16 loss is finite and falls, stays near
the fp32 loss, and differs from it (so 16-bit compute really ran).

    python -m pytest tests/test_execute_precision.py -q
"""

from __future__ import annotations

import math

import pytest

from dist_utils import even_stages

from autoplan.errors import LayoutError
from autoplan.execute.apply import check_launch
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.models.transformer import unit_names
from autoplan.plan.plan import Layout

SHAPE = BUILTIN_SHAPES["gpt-tiny"].to_dict()
STEPS, LR, SEED = 5, 0.5, 0

LAYOUTS = {
    "dp4-zero3-fsdp-mp": dict(dp=4, num_microbatches=2, zero=3),
    "dp4-ddp-autocast": dict(dp=4, num_microbatches=2, zero=0),
    "pp2xdp2-zero1-fsdp-mp": dict(dp=2, pp=2, num_microbatches=2, zero=1, stages=even_stages(4, 2)),
    "tp2xpp2-autocast": dict(tp=2, pp=2, mbs=2, num_microbatches=2, schedule="gpipe", stages=even_stages(4, 2)),
}


def precision_worker(rank: int, world_size: int, layouts: list[dict]) -> list[dict[str, list[float]]]:
    """Per layout ``{"bf16": losses, "fp32": losses}``, 5 SGD steps each from the same init and data."""
    import torch

    from autoplan.execute.apply import parallelize
    from autoplan.execute.data import synthetic_batch
    from autoplan.models.transformer import ModelShape, build_model

    s = ModelShape.from_dict(SHAPE)
    out = []
    for d in layouts:
        layout = Layout.from_dict(d)
        per = {}
        for precision in ("bf16", "fp32"):
            par = parallelize(build_model(s, seed=SEED), layout, precision=precision)
            opt = torch.optim.SGD(par.parameters(), lr=LR)
            losses = []
            for step in range(STEPS):
                tokens, labels = synthetic_batch(step, layout.global_batch, s.seq_len, s.vocab, SEED)
                losses.append(par.step(par.batch_slice(tokens), par.batch_slice(labels)))
                opt.step()
                opt.zero_grad()
            per[precision] = losses
        out.append(per)
    return out


SHARED_JOBS = {"layouts": (4, precision_worker, (list(LAYOUTS.values()),), 150)}   # tests/conftest.py


@pytest.fixture(scope="module")
def results(shared_jobs):
    return shared_jobs.get(__name__, "layouts")


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read the shared job waits for all of it
@pytest.mark.parametrize("index, name", list(enumerate(LAYOUTS)))
def test_bf16_plan_trains(results, index, name):
    bf16, fp32 = results[0][index]["bf16"], results[0][index]["fp32"]
    assert all(math.isfinite(x) for x in bf16), bf16
    assert bf16[-1] < bf16[0] - 0.1, f"bf16 loss does not fall: {bf16}"
    for a, b in zip(bf16, fp32, strict=True):
        assert abs(a - b) <= 0.05 * b, f"bf16 loss {a} far from fp32 {b}"
    assert max(abs(a - b) for a, b in zip(bf16, fp32)) > 1e-5, "bf16 run identical to fp32: no 16-bit compute"
    assert all(r[index] == results[0][index] for r in results), "ranks disagree on the loss"


def test_unknown_precision_is_refused():
    units = unit_names(BUILTIN_SHAPES["gpt-tiny"])
    with pytest.raises(LayoutError, match="fp32|bf16|fp16"):
        check_launch(Layout(dp=2, stages=[units]), world_size=2, unit_names=units, precision="int4")


def test_fp8_is_refused_where_it_cannot_run():
    """fp8 trains through torchao on GPUs with fp8 tensor cores; on CPU the refusal names why, in one line."""
    import torch

    from autoplan.execute.fp8 import check_fp8, fp8_refusal
    why = fp8_refusal(torch.device("cpu"), tp=1)
    assert "CUDA GPU with fp8 tensor cores" in why and "\n" not in why
    with pytest.raises(LayoutError, match="fp8"):
        check_fp8(torch.device("cpu"), tp=1)


@pytest.mark.slow
def test_fp8_chunks_compile_their_blocks_in_place():
    """An fp8 chunk's blocks are compiled (torchao's casts fused; eager they ran 0.3-0.5x of bf16 on an
    H200): in place, so parameter names, the recompute wrapper and the block's output stay the same."""
    import torch

    from autoplan.execute.fp8 import compile_blocks
    from autoplan.models.recompute import apply_recompute
    from autoplan.models.transformer import build_model
    torch.manual_seed(0)
    model = build_model(BUILTIN_SHAPES["gpt-tiny"])
    apply_recompute(model.blocks, mode="full")
    names = [n for n, _ in model.named_parameters()]
    x = torch.randn(2, 8, BUILTIN_SHAPES["gpt-tiny"].hidden)
    eager = [b(x) for b in model.blocks.values()]
    compile_blocks(model.blocks)
    assert [n for n, _ in model.named_parameters()] == names
    assert all(type(b).__name__ == "CheckpointWrapper" for b in model.blocks.values())
    for block, ref in zip(model.blocks.values(), eager):
        out = block(x)
        out.sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
