"""Tiny Hugging Face checkpoints, a tokenizer and a text corpus made inside a test (no downloads).

    root = make_assets(tmp_path)          # root/gpt2, root/llama (sharded), root/tokenizer, root/corpus.txt
    tokens = root / "corpus.bin"          # after tokenize_text(root / "corpus.txt", root / "tokenizer", tokens)

The checkpoints are fp32 and saved with ``save_pretrained`` (GPT-2 in one ``model.safetensors``; Llama with
grouped-query attention, sharded into several files with an index); both untied, so that the
``transformers`` model trains exactly as the unit model does. The tokenizer is a byte-level BPE trained on
the corpus with :data:`VOCAB` ids, saved as a ``PreTrainedTokenizerFast`` directory.
"""

from __future__ import annotations

import random
from pathlib import Path

VOCAB = 128
"""the models' vocabulary; the tokenizer's is at most this"""
SEQ_LEN = 16

_SENTENCES = [
    "The river ran low that summer, and the mill stood quiet for weeks.",
    "Every morning the baker counted the loaves twice before opening the door.",
    "A lantern swung in the wind above the harbour, and the boats came home late.",
    "She wrote the letters by hand, slowly, because the ink was precious.",
    "The children learned the names of the stars from an old sailor.",
    "When the snow melted, the road to the village turned to mud.",
    "He kept a small garden of beans and onions behind the school.",
    "The clock in the square had stopped at a quarter past nine.",
    "Travellers paid for their supper with stories from distant towns.",
    "On market days the square was full of carts, geese and shouting.",
    "The old bridge was mended with stones carried up from the river bed.",
    "At night the wind carried the sound of the sea across the fields.",
]


def corpus_text(n_sentences: int = 400, seed: int = 0) -> str:
    """About ``n_sentences * 60`` characters of prose: the sentences above in a seeded order, in paragraphs."""
    rng = random.Random(seed)
    paras = []
    for _ in range(n_sentences // 5):
        paras.append(" ".join(rng.choice(_SENTENCES) for _ in range(5)))
    return "\n\n".join(paras) + "\n"


def make_tokenizer(text: str, out_dir: Path, vocab: int = VOCAB) -> int:
    """Train a byte-level BPE of at most ``vocab`` ids on ``text``; save it to ``out_dir``; its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = sorted(set(pre_tokenizers.ByteLevel.alphabet()) & set("".join(
        c for c in text.encode().decode("latin-1"))) | set(" \n"))
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=alphabet, special_tokens=["<eos>"],
                                  show_progress=False)
    tok.train_from_iterator([text], trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    fast.save_pretrained(str(out_dir))
    return len(fast)


def make_gpt2(out_dir: Path, *, layers: int = 4, hidden: int = 32, heads: int = 4, vocab: int = VOCAB,
              seed: int = 0, tied: bool = False) -> None:
    """A GPT-2 checkpoint; ``tied``: input and output embeddings shared (no ``lm_head.weight`` in the file)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab, n_positions=SEQ_LEN,
                     bos_token_id=0, eos_token_id=0, tie_word_embeddings=tied)
    GPT2LMHeadModel(cfg).save_pretrained(str(out_dir))


def make_llama(out_dir: Path, *, layers: int = 4, hidden: int = 32, heads: int = 4, kv_heads: int = 2,
               ffn: int = 64, vocab: int = VOCAB, seed: int = 0, max_shard_size: str = "24KB") -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, intermediate_size=ffn, vocab_size=vocab,
                      max_position_embeddings=SEQ_LEN, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    LlamaForCausalLM(cfg).save_pretrained(str(out_dir), max_shard_size=max_shard_size)


def make_assets(root: Path) -> Path:
    """Both checkpoints, the tokenizer and the corpus text under ``root``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    text = corpus_text()
    (root / "corpus.txt").write_text(text)
    make_tokenizer(text, root / "tokenizer")
    make_gpt2(root / "gpt2")
    make_llama(root / "llama")
    return root
