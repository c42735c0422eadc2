"""A pre-tokenized corpus as training batches: DP-disjoint, deterministic, resumable, with a validation split.

    corpus = TokenCorpus.open("corpus.bin", vocab=50257)            # or "a.npy,b.npy" or a directory
    data = TokenBatches(corpus, seq_len=1024, global_batch=32, val_fraction=0.05, seed=0)
    tokens, labels = data.train_batch(step, dp_rank=r, dp_size=dp)  # int64 [32 // dp, 1024] each
    state = data.state(step + 1)                                    # into the checkpoint; resume with
    data.load_state(state)                                          # ... the same stream continues

Files. A ``.bin`` file is a flat array of little-endian token ids, as nanoGPT's ``train.bin`` and the
``.bin`` of Megatron's indexed datasets hold them, with no header: ``uint16`` when the model's vocabulary
has at most 65,536 ids, ``uint32`` above (the token width follows the vocabulary, so the same model always
reads the same width). A sidecar ``<file>.json`` written by :func:`tokenize_text` (``autoplan tokenize``:
``{"dtype": "uint16", "vocab_size": 50257, "num_tokens": ...}``) is checked when present: its width must be
the model's and its tokenizer's vocabulary must fit the model's. A ``.npy`` file carries its own dtype (any
unsigned or signed integer type). ``--data`` names one file, several separated by commas, or a directory
(its ``*.bin`` and ``*.npy`` files in name order); the files are shards of one corpus.

Samples. Shard ``f`` of ``n_f`` tokens holds ``(n_f - 1) // s`` samples: sample ``i`` is tokens
``[i*s, i*s + s + 1)`` of the shard (consecutive samples share one token: the labels are the inputs shifted by
one, as in Megatron's GPT dataset), and samples never cross shards. Samples are numbered across shards in
order; the last ``val_fraction`` of them (at least one global batch when ``val_fraction > 0``) are the
validation split, the rest the training split.

Order. The training split is shuffled once per epoch (a permutation drawn from ``seed`` and the epoch), and
global batch ``k`` is training samples ``k*B .. k*B + B - 1`` of that endless sequence. DP rank ``r`` of
``dp`` takes rows ``[r*B/dp, (r+1)*B/dp)`` of the global batch, so DP ranks read disjoint windows and the
ranks of one DP replica (TP ranks, pipeline stages) the same ones. The only state is the number of training
samples consumed (:meth:`TokenBatches.state`), saved with the checkpoint; resuming from it continues the
exact sequence, even under a layout with another data-parallel degree.

Pipeline stages read only what they use: the first stage the inputs, the last the labels; a rank that needs
neither reads nothing (it gets zeros of the right shape, which :meth:`Parallelized.step` ignores there).

Every token id is checked against the vocabulary when the corpus is opened (one pass over the files, in
chunks of :data:`SCAN_CHUNK_TOKENS`), so that every rank refuses a bad corpus alike, before training starts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from autoplan.errors import InputError
from autoplan.jsonio import write_json_atomic

UINT16_MAX_VOCAB = 1 << 16
"""vocabularies up to this many ids are stored as uint16; larger ones as uint32"""

SCAN_CHUNK_TOKENS = 1 << 24
"""tokens checked against the vocabulary per numpy pass when a corpus is opened (32 MiB of uint16)"""

SIDECAR_SUFFIX = ".json"
"""``corpus.bin`` -> ``corpus.bin.json``: the tokenizer's description of a ``.bin`` file"""


def token_dtype(vocab: int) -> np.dtype:
    """The on-disk width of a ``.bin`` token file for a vocabulary of ``vocab`` ids (little-endian)."""
    return np.dtype("<u2") if vocab <= UINT16_MAX_VOCAB else np.dtype("<u4")


def sidecar_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def _shard_paths(spec: str) -> list[Path]:
    paths: list[Path] = []
    for part in (s.strip() for s in str(spec).split(",")):
        if not part:
            continue
        p = Path(part)
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.suffix in (".bin", ".npy") and q.is_file())
            if not found:
                raise InputError(f"token directory {p} holds no .bin or .npy files")
            paths.extend(found)
        elif p.is_file():
            if p.suffix not in (".bin", ".npy"):
                raise InputError(f"token file {p}: expected a .bin or .npy file")
            paths.append(p)
        else:
            raise InputError(f"token file not found: {p}")
    if not paths:
        raise InputError(f"no token files in {spec!r}")
    return paths


def _open_shard(path: Path, vocab: int) -> np.ndarray:
    """A read-only memory map of one shard's token ids (1-D)."""
    if path.suffix == ".npy":
        try:
            arr = np.load(path, mmap_mode="r")
        except (ValueError, OSError) as e:
            raise InputError(f"{path}: not a readable .npy file ({e})") from None
        if arr.dtype.kind not in "ui":
            raise InputError(f"{path}: token ids must be integers, the file holds {arr.dtype}")
        return arr.reshape(-1)
    dtype = token_dtype(vocab)
    side = sidecar_path(path)
    if side.is_file():
        try:
            meta = json.loads(side.read_text())
            side_dtype, side_vocab = np.dtype(meta["dtype"]).newbyteorder("<"), int(meta["vocab_size"])
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{side}: malformed token-file description ({type(e).__name__}: {e})") from None
        if side_dtype != dtype:
            raise InputError(f"{path} holds {side_dtype.name} tokens ({side}) but a vocabulary of {vocab} "
                             f"ids is read as {dtype.name}")
        if side_vocab > vocab:
            raise InputError(f"{path} was tokenized with a vocabulary of {side_vocab} ids ({side}) but the model "
                             f"has {vocab}: the tokenizer does not match the model")
    size = path.stat().st_size
    if size % dtype.itemsize:
        raise InputError(f"{path}: {size} bytes is not a whole number of {dtype.name} tokens")
    if size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def _check_ids(path: Path, arr: np.ndarray, vocab: int) -> None:
    for start in range(0, arr.shape[0], SCAN_CHUNK_TOKENS):
        chunk = np.asarray(arr[start:start + SCAN_CHUNK_TOKENS])
        hi, lo = int(chunk.max()), int(chunk.min())
        if hi >= vocab or lo < 0:
            bad = int(np.flatnonzero((chunk >= vocab) | (chunk < 0))[0]) + start
            raise InputError(f"{path}: token {bad} is {int(arr[bad])}, outside the model's vocabulary "
                             f"of {vocab} ids")


@dataclass(frozen=True)
class TokenCorpus:
    """The shards of one pre-tokenized corpus, memory-mapped, every id checked below ``vocab``."""

    paths: tuple[Path, ...]
    arrays: tuple[np.ndarray, ...]
    vocab: int

    @classmethod
    def open(cls, spec: str | os.PathLike, *, vocab: int) -> "TokenCorpus":
        """``spec``: a ``.bin``/``.npy`` file, several separated by commas, or a directory of them."""
        paths = _shard_paths(os.fspath(spec))
        arrays = tuple(_open_shard(p, vocab) for p in paths)
        for p, a in zip(paths, arrays):
            _check_ids(p, a, vocab)
        return cls(paths=tuple(paths), arrays=arrays, vocab=vocab)

    @property
    def num_tokens(self) -> int:
        return sum(int(a.shape[0]) for a in self.arrays)

    def fingerprint(self) -> dict:
        """What identifies the corpus in a checkpoint: shard names and token counts."""
        return {"files": [p.name for p in self.paths], "tokens": [int(a.shape[0]) for a in self.arrays]}


class TokenBatches:
    """Training and validation batches of ``seq_len`` tokens from a :class:`TokenCorpus` (see the module
    docstring for the sample order)."""

    def __init__(self, corpus: TokenCorpus, *, seq_len: int, global_batch: int, val_fraction: float = 0.0,
                 seed: int = 0):
        if not 0.0 <= val_fraction < 1.0:
            raise InputError(f"the validation fraction must be in [0, 1), got {val_fraction}")
        self.corpus, self.seq_len, self.global_batch, self.seed = corpus, seq_len, global_batch, seed
        per_shard = [max(0, (int(a.shape[0]) - 1) // seq_len) for a in corpus.arrays]
        self._starts = np.cumsum([0] + per_shard)          # first global sample index of each shard
        total = int(self._starts[-1])
        n_val = 0 if val_fraction == 0 else max(global_batch, int(np.ceil(val_fraction * total)))
        self.num_val = n_val
        self.num_train = total - n_val
        if self.num_train < global_batch:
            raise InputError(
                f"the corpus ({corpus.num_tokens} tokens in {len(corpus.paths)} file(s)) holds {total} samples of "
                f"{seq_len}+1 tokens{f', {n_val} of them held out for validation' if n_val else ''}: fewer "
                f"training samples than one global batch of {global_batch}")
        self.consumed_samples = 0
        """training samples handed out before the current position (the whole state)"""
        self._perm_epoch, self._perm = -1, np.zeros(0, dtype=np.int64)

    # -- the stream --------------------------------------------------------------------------
    def _train_index(self, k: int) -> int:
        """Global sample index of the ``k``-th training sample of the endless shuffled sequence."""
        epoch, i = divmod(k, self.num_train)
        if epoch != self._perm_epoch:
            g = np.random.default_rng([self.seed, epoch])
            self._perm, self._perm_epoch = g.permutation(self.num_train), epoch
        return int(self._perm[i])

    def _window(self, index: int, *, inputs: bool, labels: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
        shard = int(np.searchsorted(self._starts, index, side="right") - 1)
        start = (index - int(self._starts[shard])) * self.seq_len
        arr = self.corpus.arrays[shard]
        s = self.seq_len
        return (np.asarray(arr[start:start + s]) if inputs else None,
                np.asarray(arr[start + 1:start + s + 1]) if labels else None)

    def _rows(self, indices: list[int], inputs: bool, labels: bool) -> tuple[torch.Tensor, torch.Tensor]:
        tok = torch.zeros(len(indices), self.seq_len, dtype=torch.int64)
        lab = torch.zeros(len(indices), self.seq_len, dtype=torch.int64)
        for row, idx in enumerate(indices):
            x, y = self._window(idx, inputs=inputs, labels=labels)
            if x is not None:
                tok[row] = torch.from_numpy(x.astype(np.int64))
            if y is not None:
                lab[row] = torch.from_numpy(y.astype(np.int64))
        return tok, lab

    def _dp_rows(self, dp_rank: int, dp_size: int) -> range:
        if self.global_batch % dp_size:
            raise InputError(f"global batch {self.global_batch} does not split over dp={dp_size}")
        per = self.global_batch // dp_size
        return range(dp_rank * per, (dp_rank + 1) * per)

    def next_train_batch(self, *, dp_rank: int = 0, dp_size: int = 1, inputs: bool = True,
                         labels: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """This DP rank's rows of the next global batch, int64 ``[global_batch / dp_size, seq_len]`` each
        (zeros where ``inputs``/``labels`` is False); advances the position by one global batch."""
        base = self.consumed_samples
        rows = [self._train_index(base + j) for j in self._dp_rows(dp_rank, dp_size)]
        self.consumed_samples += self.global_batch
        return self._rows(rows, inputs, labels)

    def val_batches(self, n_batches: int, *, dp_rank: int = 0, dp_size: int = 1, inputs: bool = True,
                    labels: bool = True) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The first ``n_batches`` global batches of the validation split (in order, always the same), this
        DP rank's rows of each; fewer when the split is shorter."""
        out = []
        for b in range(min(n_batches, self.num_val // self.global_batch)):
            first = self.num_train + b * self.global_batch
            out.append(self._rows([first + j for j in self._dp_rows(dp_rank, dp_size)], inputs, labels))
        return out

    # -- checkpointed position ------------------------------------------------------------------
    def state(self) -> dict:
        """The position, as a JSON-able dict for the checkpoint."""
        return {"consumed_samples": self.consumed_samples, "seed": self.seed, "seq_len": self.seq_len,
                "num_train": self.num_train, "corpus": self.corpus.fingerprint()}

    def load_state(self, state: dict) -> None:
        """Continue from :meth:`state` of another run over the same corpus, split and sequence length."""
        mine = self.state()
        for key in ("seed", "seq_len", "num_train", "corpus"):
            if state.get(key) != mine[key]:
                raise InputError(f"the checkpoint's data position is for another stream ({key}: "
                                 f"{state.get(key)!r}, now {mine[key]!r})")
        self.consumed_samples = int(state["consumed_samples"])


# --------------------------------------------------------------------------------------------
# text -> token file
# --------------------------------------------------------------------------------------------

TEXT_CHUNK_CHARS = 1 << 20
"""characters of the text file tokenized at a time (cut at a line end), so memory stays bounded"""


def tokenize_text(text_path: str | os.PathLike, tokenizer_dir: str | os.PathLike, out_path: str | os.PathLike, *,
                  model_vocab: int | None = None) -> dict:
    """Tokenize a UTF-8 text file with a local Hugging Face tokenizer directory into a ``.bin`` token file.

    The text is tokenized in pieces of about :data:`TEXT_CHUNK_CHARS` characters cut at line ends (no special
    tokens added). The width is :func:`token_dtype` of the vocabulary the file is read with: the model's
    (``model_vocab``) when given, which must hold the tokenizer's vocabulary, else the tokenizer's own.
    Writes ``out_path`` and its sidecar ``out_path.json`` through temporary files renamed at the end (nothing
    half-written); returns the sidecar's contents.
    """
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputError("tokenizing needs the `transformers` package: pip install 'autoplan[hf]'") from None
    tdir, text, out = Path(tokenizer_dir), Path(text_path), Path(out_path)
    if not tdir.is_dir():
        raise InputError(f"tokenizer directory not found: {tdir}")
    if not text.is_file():
        raise InputError(f"text file not found: {text}")
    if out.suffix != ".bin":
        raise InputError(f"the token file must end in .bin, got {out}")
    try:
        tok = AutoTokenizer.from_pretrained(str(tdir), local_files_only=True)
    except (OSError, ValueError) as e:
        raise InputError(f"{tdir}: not a Hugging Face tokenizer directory ({str(e).strip().splitlines()[0]})") from None
    n_vocab = len(tok)
    if model_vocab is not None and n_vocab > model_vocab:
        raise InputError(f"the tokenizer in {tdir} has {n_vocab} ids but the model's vocabulary has {model_vocab}: "
                         f"the tokenizer does not match the model")
    dtype = token_dtype(model_vocab if model_vocab is not None else n_vocab)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    n_tokens = 0
    try:
        with open(text, encoding="utf-8") as src, open(tmp, "wb") as dst:
            while True:
                piece = src.read(TEXT_CHUNK_CHARS)
                if not piece:
                    break
                piece += src.readline()              # finish the line
                ids = np.asarray(tok(piece, add_special_tokens=False)["input_ids"], dtype=np.int64)
                dst.write(ids.astype(dtype).tobytes())
                n_tokens += int(ids.size)
        meta = {"dtype": dtype.name, "vocab_size": n_vocab, "num_tokens": n_tokens, "tokenizer": str(tdir),
                "text": str(text)}
        write_json_atomic(sidecar_path(out), meta)
        os.replace(tmp, out)
    except UnicodeDecodeError as e:
        raise InputError(f"{text}: not UTF-8 text ({e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return meta


__all__ = ["TokenBatches", "TokenCorpus", "UINT16_MAX_VOCAB", "sidecar_path", "token_dtype", "tokenize_text"]


def model_vocab(spec: str) -> int:
    """The vocabulary size of the model ``spec`` names (:func:`autoplan.models.source.resolve_model`),
    known without building it: a transformer spec (``hf:DIR``, a built-in name, a shape file)."""
    from autoplan.models.source import resolve_model
    shape = resolve_model(spec).shape
    if shape is None:
        raise InputError(f"--model {spec}: its vocabulary is not known without building it; give a "
                         f"transformer spec (hf:DIR, a built-in name, a shape file)")
    return shape.vocab
