"""Context parallel (cp) trains equal to one process on the whole sequence: gloo CPU processes, SGD.

Models: the built-in transformer (no position encoding, GeLU), ``hf:gpt2-tiny`` (learned positions,
GeLU) and ``hf:llama-tiny`` (rotary positions, SwiGLU, grouped-query attention: 4 heads, 2 KV heads),
2 blocks each, sequence 32 (2*cp = 4 chunks of 8). cp=2 alone on 2 processes; cp=2 with tp=2 (+sp),
pp=2 (1F1B, GPipe, interleaved) and dp=2 ZeRO-3 on 4 processes, in the session's shared job of each
process count (tests/conftest.py).
Losses of every step and the gradients of the first step match the single-process reference
(tolerances of tests/test_equivalence.py). The exchange on CPU is the all-gather of K/V
(autoplan.execute.cp). Also: examples/train_gpt.py runs a cp plan under torchrun.

    python -m pytest tests/test_context_parallel.py -q
"""

from __future__ import annotations

import re
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import assert_equivalent, even_stages, layout_key, layouts_worker, reference_run
from test_execute import TRAIN, run_script, write_plan

from autoplan.errors import InputError, LayoutError
from autoplan.execute.cp import attend_gathered, check_context_parallel
from autoplan.models.attention import SequenceShard
from autoplan.models.factory import SequentialUnits
from autoplan.models.shapes import BUILTIN_SHAPES
from autoplan.models.transformer import build_model
from autoplan.plan.plan import Layout

STEPS, LR, SEED = 2, 0.1, 0
BUILTIN = {**BUILTIN_SHAPES["gpt-tiny"].to_dict(), "layers": 2}   # h=64, 4 heads, vocab 256, s=32
GPT2, LLAMA = "hf:gpt2-tiny,layers=2", "hf:llama-tiny,layers=2"
PP2 = even_stages(2, 2)

CASES_2 = {   # name: (model, layout)
    "builtin-cp2-ddp": (BUILTIN, dict(cp=2, mbs=2, num_microbatches=1)),
    "gpt2-cp2-selective": (GPT2, dict(cp=2, mbs=1, num_microbatches=2, recompute="selective")),
    "llama-cp2-full": (LLAMA, dict(cp=2, mbs=2, num_microbatches=1, recompute="full")),
}
CASES_4 = {
    "builtin-cp2xdp2-zero3": (BUILTIN, dict(cp=2, dp=2, mbs=1, num_microbatches=1, zero=3)),
    "builtin-cp2xpp2-interleaved": (BUILTIN, dict(cp=2, pp=2, vp=2, mbs=1, num_microbatches=2,
                                                  schedule="interleaved", stages=even_stages(2, 4))),
    "gpt2-cp2xtp2-sp": (GPT2, dict(cp=2, tp=2, sp=1, mbs=2, num_microbatches=1)),
    "gpt2-cp2xpp2-1f1b": (GPT2, dict(cp=2, pp=2, mbs=1, num_microbatches=2, stages=PP2)),
    "llama-cp2xtp2-sp": (LLAMA, dict(cp=2, tp=2, sp=1, mbs=1, num_microbatches=2, recompute="selective")),
    "llama-cp2xpp2-gpipe": (LLAMA, dict(cp=2, pp=2, mbs=1, num_microbatches=2, schedule="gpipe", stages=PP2)),
    "llama-cp2xdp2-zero3": (LLAMA, dict(cp=2, dp=2, mbs=1, num_microbatches=1, zero=3, recompute="full")),
}


def cases_worker(rank: int, world_size: int, cases: dict[str, tuple], bad_seq_len: int | None) -> dict:
    """Train every case (grouped by model); with ``bad_seq_len``, also step a cp=2 layout on
    sequences of that length and return the error each rank raises under ``"bad_seq_len"``."""
    from autoplan.execute.apply import parallelize

    out: dict = {}
    for model in {repr(m): m for m, _ in cases.values()}.values():
        layouts = [d for m, d in cases.values() if m == model]
        out.update({(repr(model), k): v for k, v in layouts_worker(rank, world_size, model, layouts, STEPS, LR,
                                                                     SEED).items()})
    if bad_seq_len is not None:
        par = parallelize(build_model(BUILTIN_SHAPES["gpt-tiny"]), Layout(cp=world_size))
        tokens = torch.zeros(1, bad_seq_len, dtype=torch.int64)
        try:
            par.step(tokens, tokens)
        except InputError as e:
            out["bad_seq_len"] = str(e)
    return out


SHARED_JOBS = {"cases_2": (2, cases_worker, (CASES_2, 30), 150), "cases_4": (4, cases_worker, (CASES_4, None), 200)}


@pytest.fixture(scope="module")
def results_2(shared_jobs):
    return shared_jobs.get(__name__, "cases_2")


@pytest.fixture(scope="module")
def results_4(shared_jobs):
    return shared_jobs.get(__name__, "cases_4")


_REFERENCES: dict[tuple[str, int], tuple] = {}


def check(results: list[dict], model, d: dict) -> None:
    """The case's losses and gradients on every rank against one process (each reference run once)."""
    batch = Layout.from_dict(d).global_batch
    key = (repr(model), batch)
    if key not in _REFERENCES:
        _REFERENCES[key] = reference_run(model, global_batch=batch, steps=STEPS, lr=LR, seed=SEED)
    assert_equivalent(_REFERENCES[key], [r[(repr(model), layout_key(d))] for r in results])


@pytest.mark.slow
@pytest.mark.timeout(600)          # the first test to read a shared job waits for all of it
@pytest.mark.parametrize("name", list(CASES_2))
def test_cp2_alone_matches_single_process(results_2, name):
    check(results_2, *CASES_2[name])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sequence_not_divisible_by_2cp_is_refused_on_every_rank(results_2):
    assert [r.get("bad_seq_len") for r in results_2] == [
        "context parallel cp=2 cuts each sequence into 2*cp = 4 equal chunks: sequence length 30 is not "
        "divisible by 4"] * 2


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(CASES_4))
def test_cp2_with_tp_pp_zero3_matches_single_process(results_4, name):
    check(results_4, *CASES_4[name])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_train_gpt_runs_a_cp_plan(tmp_path):
    """examples/train_gpt.py under torchrun, cp=2 x 2 micro-batches: the printed losses are one
    process's on the whole sequences."""
    plan = write_plan(tmp_path / "plan.json", cp=2, mbs=2, num_microbatches=2)
    r = run_script([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                    str(TRAIN), "--plan", str(plan), "--steps", "3", "--optimizer", "sgd", "--lr", str(LR)])
    assert r.returncode == 0, r.stderr[-2000:]
    losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)", r.stdout, re.M)]
    ref, _ = reference_run(BUILTIN_SHAPES["gpt-tiny"].to_dict(), global_batch=4, steps=3, lr=LR, seed=0)
    assert losses == pytest.approx(ref, rel=1e-5)


# --- no processes ------------------------------------------------------------------------------

@pytest.mark.parametrize("cp", [1, 2, 3, 4])
def test_shards_cover_the_sequence_with_equal_causal_work(cp):
    s = 48
    seq = torch.arange(s)[None]
    shards = [SequenceShard(r, cp) for r in range(cp)]
    taken = [sh.take(seq, dim=1)[0] for sh in shards]
    assert all(torch.equal(t, sh.positions(s // cp)) for t, sh in zip(taken, shards))
    assert torch.equal(torch.sort(torch.cat(taken)).values, torch.arange(s))
    assert torch.equal(shards[0].all_positions(s // cp), torch.cat(taken))
    # causal attention work of a rank: keys visible to its queries, sum of (position + 1)
    assert len({int((t + 1).sum()) for t in taken}) == 1
    assert shards[-1].chunks() == (cp - 1, cp)


def test_shard_refuses_a_sequence_not_divisible_by_2cp():
    with pytest.raises(InputError, match="sequence length 20 is not divisible by 8"):
        SequenceShard(1, 4).take(torch.zeros(2, 20), dim=1)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_gathered_attention_with_global_positions_equals_full_causal(kv_heads):
    """Each rank's queries against every rank's K/V (rank order, as the all-gather lays them out)
    with the positions' mask give the rows of full causal attention at those positions."""
    cp, b, a, s, hd = 2, 2, 4, 16, 8
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, n, s, hd, generator=g) for n in (a, kv_heads, kv_heads))
    rep = a // kv_heads
    full = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                          is_causal=True)
    shards = [SequenceShard(r, cp) for r in range(cp)]
    k_all = torch.cat([sh.take(k, dim=2) for sh in shards], dim=2)
    v_all = torch.cat([sh.take(v, dim=2) for sh in shards], dim=2)
    for sh in shards:
        got = attend_gathered(sh.take(q, dim=2), k_all, v_all, sh, scale=None)
        torch.testing.assert_close(got, sh.take(full, dim=2), rtol=1e-5, atol=1e-6)


def test_cp_refused_before_any_collective():
    seq = SequentialUnits(nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 8)), vocab_size=8, seq_len=16)
    with pytest.raises(LayoutError, match="exposes no attention_core"):
        check_context_parallel(seq, 2, 16)
    with pytest.raises(InputError, match="sequence length 18 is not divisible by 4"):
        check_context_parallel(build_model(BUILTIN_SHAPES["gpt-tiny"]), 2, 18)
    check_context_parallel(seq, 1, 18)   # cp=1: nothing to check
