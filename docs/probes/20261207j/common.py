"""Probes 20261207j: what the part 2-4 workers share (under torchrun, gloo on CPU): their options, timing closures in
turn, the whole model's case 4/m pairs at a time, and every rank's medians gathered."""
import argparse
import statistics as st

import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.measure import turn_order


def add_args(ap: argparse.ArgumentParser, rounds: int = 12) -> None:
    """--spec (the shape JSON the job builds), --rounds, --warmup, --out."""
    ap.add_argument("--spec", required=True, help="the shape JSON the job builds")
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)


def in_turn(steps: dict, rounds: int, warmup: int, device, slowest_each: bool = False) -> dict[str, list[float]]:
    """Each of ``steps`` ({name: closure}) once per round behind a barrier, the order rotated: {name: this rank's
    seconds per round after ``warmup``} (``slowest_each``: every round's slowest rank's)."""
    names = list(steps)
    got = {k: [] for k in names}
    for r in range(warmup + rounds):
        for k in turn_order(len(names), r):
            t = gm._timed(steps[names[k]], device)
            if slowest_each:
                t = gm._agree_max(t)
            if r >= warmup:
                got[names[k]].append(t)
    return got


def whole_model_cases(job, sizes, per_rank: int = 4) -> dict:
    """{"W m": the whole model's case (``group_measure._whole_model_case``, one module) run ``per_rank // m`` times
    (at least once), gradients cleared after} for each m of ``sizes``."""
    out, first = {}, None
    for m in sizes:
        case = gm._whole_model_case(job, m, first.module if first is not None else None)
        first = first or case

        def whole(c=case, n=max(1, per_rank // m)) -> None:
            for _ in range(n):
                c.backward(c.forward())
            c.module.zero_grad(set_to_none=True)
        out[f"W{m}"] = whole
    return out


def plan_pipeline_step(job, layout, device):
    """The profile's ``pipeline_step`` closure of ``layout`` (1F1B, its stages as chunks) in the group job ``job``."""
    from autoplan.execute.pipeline_profile import pipeline_step
    sizes = tuple(len(s) for s in layout.stages)
    return pipeline_step(job, layout.pp, 1, "1f1b", layout.num_microbatches, layout.mbs, device, sizes)[1]


def rank_medians(got: dict[str, list[float]]) -> dict[str, list[float]]:
    """{name: every rank's median of its seconds} (the same on every rank)."""
    mine = {k: st.median(v) for k, v in got.items()}
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return {k: [e[k] for e in every] for k in mine}
