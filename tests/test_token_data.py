"""Token files as batches (autoplan.execute.token_data): widths, shards, DP-disjoint windows, resume, validation.

One process, no process group: the windows each rank would read are computed directly.

    python -m pytest tests/test_token_data.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from autoplan.errors import InputError
from autoplan.execute.token_data import TokenBatches, TokenCorpus, sidecar_path, token_dtype

VOCAB, SEQ, BATCH = 1000, 8, 6


def _stream(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, n)


def _corpus(tmp_path: Path) -> TokenCorpus:
    """Two shards: a .bin of 289 tokens and a .npy of 193 (36 + 24 samples of 8+1 tokens)."""
    _stream(289).astype("<u2").tofile(tmp_path / "a.bin")
    np.save(tmp_path / "b.npy", _stream(193, 1).astype(np.int32))
    return TokenCorpus.open(f"{tmp_path / 'a.bin'},{tmp_path / 'b.npy'}", vocab=VOCAB)


def _global_rows(data: TokenBatches) -> tuple[torch.Tensor, torch.Tensor]:
    return data.next_train_batch()


def test_windows_are_shifted_pairs_inside_one_shard(tmp_path):
    corpus = _corpus(tmp_path)
    data = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=3)
    assert data.num_train == 36 + 24 and data.num_val == 0
    flat = [np.fromfile(tmp_path / "a.bin", dtype="<u2"), np.load(tmp_path / "b.npy")]
    for _ in range(12):                                  # past one epoch (60 samples): a second permutation
        x, y = _global_rows(data)
        assert torch.equal(x[:, 1:], y[:, :-1])
        for row in x.numpy():                            # each window is a contiguous run of one shard
            assert any(any(np.array_equal(row, a[i * SEQ:i * SEQ + SEQ]) for i in range((len(a) - 1) // SEQ))
                       for a in flat)
    seen = set()
    first = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=3)
    for _ in range(10):                                  # one epoch: every sample exactly once
        seen |= {tuple(r) for r in _global_rows(first)[0].tolist()}
    assert len(seen) == 60


def test_dp_ranks_disjoint_and_stages_read_only_what_they_use(tmp_path):
    corpus = _corpus(tmp_path)
    whole = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=0)
    ranks = [TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=0) for _ in range(3)]
    for _ in range(4):
        x, y = _global_rows(whole)
        parts = [r.next_train_batch(dp_rank=i, dp_size=3) for i, r in enumerate(ranks)]
        assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(torch.cat([p[1] for p in parts]), y)
    first = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=0).next_train_batch(labels=False)
    last = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=0).next_train_batch(inputs=False)
    x, y = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=0).next_train_batch()
    assert torch.equal(first[0], x) and not first[1].any()
    assert torch.equal(last[1], y) and not last[0].any()
    assert not torch.equal(TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, seed=1).next_train_batch()[0], x)


def test_resume_from_the_saved_position_continues_the_stream(tmp_path):
    corpus = _corpus(tmp_path)
    straight = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, val_fraction=0.1, seed=5)
    want = [_global_rows(straight) for _ in range(14)]
    before = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, val_fraction=0.1, seed=5)
    for _ in range(9):
        before.next_train_batch()
    state = json.loads(json.dumps(before.state()))      # as the checkpoint stores it
    ranks = [TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, val_fraction=0.1, seed=5) for _ in range(2)]
    for r in ranks:                                      # resumed under dp=2: each rank its half of the same rows
        r.load_state(state)
    for k in range(9, 14):
        a, b = (r.next_train_batch(dp_rank=i, dp_size=2) for i, r in enumerate(ranks))
        assert torch.equal(torch.cat([a[0], b[0]]), want[k][0]) and torch.equal(torch.cat([a[1], b[1]]), want[k][1])
    other = TokenBatches(corpus, seq_len=SEQ, global_batch=BATCH, val_fraction=0.1, seed=6)
    with pytest.raises(InputError, match="another stream"):
        other.load_state(state)


def test_validation_split_is_held_out(tmp_path):
    data = TokenBatches(_corpus(tmp_path), seq_len=SEQ, global_batch=BATCH, val_fraction=0.2, seed=0)
    assert (data.num_train, data.num_val) == (48, 12)
    val = {tuple(r) for x, _ in data.val_batches(5) for r in x.tolist()}
    assert len(data.val_batches(5)) == 2 and len(val) == 12
    train = {tuple(r) for _ in range(8) for r in data.next_train_batch()[0].tolist()}
    assert len(train) == 48 and not train & val
    assert [torch.equal(a[0], b[0]) for a, b in zip(data.val_batches(2), data.val_batches(2))] == [True, True]


def test_token_width_follows_the_vocabulary_and_bad_files_are_refused(tmp_path):
    assert token_dtype(65_536) == np.dtype("<u2") and token_dtype(65_537) == np.dtype("<u4")
    big = tmp_path / "big.bin"
    np.array([70_000, 5, 65_535, 1, 2], dtype="<u4").tofile(big)
    x, y = TokenBatches(TokenCorpus.open(big, vocab=80_000), seq_len=2, global_batch=1).next_train_batch()
    assert {tuple(x[0].tolist()), tuple(y[0].tolist())} <= {(70_000, 5), (5, 65_535), (65_535, 1), (1, 2)}
    with pytest.raises(InputError, match="outside the model's vocabulary"):
        TokenCorpus.open(big, vocab=70_000)
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x02")
    with pytest.raises(InputError, match="whole number of uint16"):
        TokenCorpus.open(odd, vocab=VOCAB)
    sidecar_path(big).write_text(json.dumps({"dtype": "uint16", "vocab_size": 100}))
    with pytest.raises(InputError, match="holds uint16 tokens"):
        TokenCorpus.open(big, vocab=80_000)
    with pytest.raises(InputError, match="not found"):
        TokenCorpus.open(tmp_path / "none.bin", vocab=VOCAB)
    with pytest.raises(InputError, match="fewer training samples than one global batch"):
        TokenBatches(_corpus(tmp_path), seq_len=SEQ, global_batch=61)
