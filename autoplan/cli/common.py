"""What every command shares: option help texts, output to a terminal or not, and option values
that are parsed (byte sizes, lists of integers)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, Optional

import typer

MODEL_HELP = ("built-in name (gpt-tiny, gpt-small, gpt3-175b, llama3-8b, ...), a shape JSON file "
              "(layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len), a model profile JSON, "
              "hf:gpt2-tiny / hf:llama-tiny / hf:NAME,key=value (Hugging Face config, random weights), "
              "hf:DIR (a local Hugging Face checkpoint directory) "
              "or path/file.py:factory")
OPTIMIZER_HELP = ("sets the optimizer-state memory; adamw-bf16: 16-bit Adam state (--framework megatron@2024); "
                  "sgd: none")
CLUSTER_HELP = "a cluster profile JSON (autoplan profile cluster) or a catalogue entry NAME:NODES, e.g. dgx-a100-80gb:16"
PRESET_OPTION_HELP = ("a hand layout as constraints: ddp, zero1, zero2, zero3 (FSDP), megatron (TP over a node + SP, "
                      "PP across nodes); --layout fields override it")
PRECISION_HELP = ("training precision (bf16/fp16: mixed, fp32 master weights; fp8: bf16 mixed with "
                  "fp8 GEMMs in the linear layers, one scale per tensor, H100/H200 only; fp8-rowwise: one scale per row, "
                  "torchao's rowwise recipe; default: bf16 on CUDA, fp32 on CPU)")
FRAMEWORK_HELP = ("the software that will run the plan, whose costs and rules are used: autoplan (this project's "
                  "executor, which `autoplan run` and `validate` run), megatron, torchtitan, deepspeed, composer; "
                  "NAME@RELEASE for an older release (megatron@2021, megatron@2022, megatron@2024); frameworks other "
                  "than autoplan are costed on catalogue clusters")
LAYOUT_HELP = ("fix part of the layout, e.g. 'tp=2,pp=2' or 'dp=4,zero=3'; keys: dp tp pp vp mbs "
               "num_microbatches zero(0-3) recompute(none|selective|full) schedule(gpipe|1f1b|interleaved) sp(0/1) "
               "grad_compression(none|fp16|powersgd, lossy) sync_every(N: local SGD, lossy) "
               "stage_blocks(estimate: blocks per pipeline chunk, e.g. 5/6/6/5)")


def err(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)


@contextmanager
def progress(description: str, enabled: bool = True) -> Iterator:
    """A rich progress bar on a terminal; nothing otherwise. Yields update(done, total, what)."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total, what="": None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[what]}"), transient=True, console=console(err=True)) as prog:
        task = prog.add_task(description, total=None, what="")

        def update(done: int, total: int, what: str = "") -> None:
            prog.update(task, completed=done, total=total, what=what)
        yield update


def console(err: bool = False):
    from rich.console import Console
    stream = sys.stderr if err else sys.stdout
    return Console(stderr=err, highlight=False, width=None if stream.isatty() else 160)


def parse_bytes(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    from autoplan.profile.links import parse_bytes as parse
    return parse(text)


def int_list(text: str, what: str) -> tuple[int, ...]:
    from autoplan.errors import InputError
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"{what} must be a comma-separated list of integers, got {text[:60]!r}") from None
    if not vals or any(not 1 <= v <= 2 ** 20 for v in vals):
        raise InputError(f"{what} must list integers from 1 to {2 ** 20}, got {text[:60]!r}")
    return vals
