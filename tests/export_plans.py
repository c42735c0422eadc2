"""The plans the export and show tests use: costed analytically on catalogue clusters (no torch run)."""

from __future__ import annotations

from functools import lru_cache

from autoplan.plan.api import complete_layout, estimate_problem, make_problem, solve_problem
from autoplan.plan.layout_input import parse_layout_constraints
from autoplan.plan.plan import Plan, SolverInfo


def plan_for(model: str, cluster: str, global_batch: int, layout: str) -> Plan:
    """A plan for a fixed layout (the solver's partitioner places the layers)."""
    pb = make_problem(model, cluster, global_batch)
    lay, pred = estimate_problem(pb, complete_layout(parse_layout_constraints(layout), pb.cluster.world_size,
                                                     global_batch))
    return pb.plan(lay, pred, SolverInfo("fixed layout", pred.step_time_s, pred.step_time_s, 0.0))


@lru_cache(maxsize=None)
def catalogue_175b_plan() -> Plan:
    """What `autoplan solve --model gpt3-175b --cluster dgx-a100-80gb:128 --global-batch 1536` chooses."""
    return solve_problem(make_problem("gpt3-175b", "dgx-a100-80gb:128", 1536))


LAYOUTS = {
    "ddp": "dp=8,zero=0",
    "zero3": "dp=8,zero=3,recompute=full,mbs=2",
    "tp_sp_pp_interleaved": "dp=2,tp=4,sp=1,pp=2,vp=2,mbs=1,recompute=selective",
}
"""the issue's layouts: DDP and ZeRO-3 on one node, TP+SP+PP interleaved on two"""
LLAMA = ("llama3-8b", "dgx-a100-80gb:2", 64, "dp=4,tp=4,sp=1,mbs=1,zero=1,recompute=selective")
"""the Llama plan (SwiGLU MLP, grouped-query attention): ZeRO-1 over 4 x TP+SP 4 on two nodes"""


@lru_cache(maxsize=None)
def done_when_plans() -> dict[str, Plan]:
    """The issue's five: DDP, ZeRO-3, TP+SP+PP interleaved (GPT-3 shapes), a Llama plan and the 175B
    catalogue plan."""
    return {
        "ddp": plan_for("gpt3-350m", "dgx-a100-80gb:1", 64, LAYOUTS["ddp"]),
        "zero3": plan_for("gpt3-1.3b", "dgx-a100-80gb:1", 64, LAYOUTS["zero3"]),
        "tp_sp_pp_interleaved": plan_for("gpt3-1.3b", "dgx-a100-80gb:2", 64, LAYOUTS["tp_sp_pp_interleaved"]),
        "llama3_8b": plan_for(*LLAMA),
        "gpt3_175b": catalogue_175b_plan(),
    }


@lru_cache(maxsize=None)
def llama_layout_plans() -> dict[str, Plan]:
    """The issue's layouts on Llama 3 8B, for frameworks that build only registered Llama models
    (torchtitan)."""
    return {name: plan_for("llama3-8b", "dgx-a100-80gb:2" if "pp" in name else "dgx-a100-80gb:1", 64, layout)
            for name, layout in LAYOUTS.items()}
