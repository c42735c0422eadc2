"""What a user writes as ``--layout``: the text parsed into fixed layout fields
(:func:`parse_layout_constraints`), a full :class:`~autoplan.plan.plan.Layout` completed from them
(:func:`complete_layout`) and an uneven pipeline partition given as block counts
(:func:`stages_from_block_counts`)."""

from __future__ import annotations

from typing import Any

from autoplan.errors import InputError, LayoutError
from autoplan.plan.plan import GRAD_COMPRESSION, RECOMPUTE, Layout
from autoplan.plan.schedules import SCHEDULES


def parse_layout_constraints(text: str | None) -> dict[str, Any]:
    """Parse ``"tp=2,pp=2,recompute=full"`` into a dict of fixed layout fields."""
    if not text:
        return {}
    ints = {"dp", "tp", "pp", "cp", "vp", "mbs", "num_microbatches", "zero", "sp", "sync_every", "recompute_every",
            "recompute_first"}
    strs = {"recompute", "schedule", "grad_compression"}
    aliases = {"m": "num_microbatches", "microbatches": "num_microbatches"}
    out: dict[str, Any] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise InputError(f"--layout: expected KEY=VALUE, got {part!r}")
        k, v = (s.strip() for s in part.split("=", 1))
        k = aliases.get(k, k)
        if k in ints:
            try:
                out[k] = int(v)
            except ValueError:
                raise InputError(f"--layout: {k} must be an integer, got {v!r}") from None
        elif k in strs:
            out[k] = v
        elif k == "stage_blocks":
            try:
                out[k] = [int(x) for x in v.replace(":", "/").split("/")]
            except ValueError:
                raise InputError(f"--layout: stage_blocks must be block counts per stage like 5/6/6/5, "
                                 f"got {v!r}") from None
            if any(c < 0 for c in out[k]) or any(c < 1 for c in out[k][1:-1]):
                raise InputError(f"--layout: stage_blocks must be positive counts (0 only for the first or last "
                                 f"chunk: the embedding or the head alone), got {v!r}")
        else:
            raise InputError(f"--layout: unknown key {k!r} (known: {', '.join(sorted(ints | strs | {'stage_blocks'}))})")
    for k, v in out.items():
        if k in ints and (v < (0 if k in ("zero", "sp") else 1)):
            raise InputError(f"--layout: {k} must be {'>= 0' if k in ('zero', 'sp') else 'positive'}, got {v}")
    if out.get("zero", 0) > 3:
        raise InputError(f"--layout: zero must be 0, 1, 2 or 3, got {out['zero']}")
    if out.get("sp", 0) > 1:
        raise InputError(f"--layout: sp must be 0 or 1, got {out['sp']}")
    if "recompute" in out and out["recompute"] not in RECOMPUTE:
        raise InputError(f"--layout: recompute must be one of {'|'.join(RECOMPUTE)}")
    if "grad_compression" in out and out["grad_compression"] not in GRAD_COMPRESSION:
        raise InputError(f"--layout: grad_compression must be one of {'|'.join(GRAD_COMPRESSION)}")
    if "schedule" in out and out["schedule"] not in SCHEDULES:
        raise InputError(f"--layout: schedule must be one of {'|'.join(SCHEDULES)}")
    return out


def stages_from_block_counts(layer_names: list[str], counts: list[int]) -> list[list[str]]:
    """Pipeline chunks holding ``counts[i]`` transformer blocks each (the way recipes publish an uneven
    partition, e.g. BLOOM's 5/6/.../6/5 or Llama 3's one block fewer on the first and last stage);
    the units before the first block (embedding) join the first chunk, those after the last block
    (head) the last chunk, so a first or last count of 0 is a chunk of the embedding or the head alone
    (Llama 3 405B's first and last chunk, section 3.3.2 of its paper)."""
    blocks = [i for i, n in enumerate(layer_names) if n.startswith("block.")]
    if not blocks:
        raise LayoutError("stage_blocks needs a transformer whose layers are named block.N")
    if sum(counts) != len(blocks):
        raise LayoutError(f"stage_blocks {'/'.join(map(str, counts))} place {sum(counts)} blocks, "
                          f"the model has {len(blocks)}")
    stages, start = [], 0
    for c in counts:
        stages.append([layer_names[i] for i in blocks[start:start + c]])
        start += c
    stages[0] = layer_names[:blocks[0]] + stages[0]
    stages[-1] = stages[-1] + layer_names[blocks[-1] + 1:]
    return stages


def device_count_violation(dp: int, tp: int, pp: int, cp: int, world: int) -> str | None:
    """Why degrees that do not multiply to the cluster's ``world`` devices are refused (None where they do):
    the one line ``solve --layout`` and ``estimate --layout`` give."""
    if dp * tp * pp * cp == world:
        return None
    names = "dp*cp*tp*pp" if cp > 1 else "dp*tp*pp"
    return f"layout {names} = {dp * tp * pp * cp} does not match the cluster's {world} devices"


def complete_layout(given: dict, world: int, global_batch: int) -> Layout:
    """A full layout from the fields the user gave. Missing: tp=1, pp=1, cp=1, dp = world/(cp*tp*pp),
    mbs=1, num_microbatches = global_batch/(dp*mbs), schedule = interleaved when vp > 1, gpipe when
    there are fewer micro-batches than pipeline stages, else 1f1b."""
    if not given:
        raise InputError("--layout is required for estimate (e.g. dp=2,tp=2,pp=1,mbs=4)")
    d = {k: v for k, v in given.items() if k != "stage_blocks"}   # placed by estimate (needs the model)
    tp, pp, cp = d.setdefault("tp", 1), d.setdefault("pp", 1), d.setdefault("cp", 1)
    if "dp" not in d:
        if world % (tp * pp * cp):
            names = "cp*tp*pp" if cp > 1 else "tp*pp"
            raise LayoutError(f"{names} = {tp * pp * cp} does not divide the world size {world}")
        d["dp"] = world // (tp * pp * cp)
    why = device_count_violation(d["dp"], tp, pp, cp, world)     # before the batch: the devices are what was miscounted
    if why:
        raise LayoutError(why)
    mbs = d.setdefault("mbs", 1)
    if "num_microbatches" not in d:
        if global_batch % (d["dp"] * mbs):
            raise LayoutError(f"dp*mbs = {d['dp'] * mbs} does not divide the global batch {global_batch}")
        d["num_microbatches"] = global_batch // (d["dp"] * mbs)
    if d.get("vp", 1) > 1:
        d.setdefault("schedule", "interleaved")
    elif pp > 1 and d["num_microbatches"] < pp:
        d.setdefault("schedule", "gpipe")     # the one torch schedule that runs fewer micro-batches than stages
    return Layout.from_dict(d, "--layout")
