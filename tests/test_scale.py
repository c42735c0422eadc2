"""Frontier scale: which groups span nodes (arithmetic, checked against enumerating the groups),
the catalogue at 2,048 nodes, Llama 3 405B's published layout costed there, and context parallel
refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from autoplan.errors import InputError
from autoplan.plan.api import estimate
from autoplan.plan.groups import spans_nodes
from autoplan.plan.layout_input import parse_layout_constraints


def _spans_by_enumeration(dp: int, tp: int, pp: int, per_node: int, nodes: int) -> tuple[bool, bool, bool]:
    if nodes <= 1:
        return False, False, False
    world = dp * tp * pp

    def any_span(groups) -> bool:
        return any(len({r // per_node for r in g}) > 1 for g in groups)

    tp_groups = [[b + i for i in range(tp)] for b in range(0, world, tp)]
    dp_groups = [[(p * dp + d) * tp + t for d in range(dp)] for p in range(pp) for t in range(tp)]
    pp_groups = [[(p * dp + d) * tp + t for p in range(pp)] for d in range(dp) for t in range(tp)]
    return any_span(tp_groups), any_span(dp_groups), any_span(pp_groups)


def test_spans_nodes_equals_enumerating_the_groups():
    checked = 0
    for per_node in (1, 2, 3, 4, 6, 8):
        for nodes in (1, 2, 3, 4, 6, 8):
            world = per_node * nodes
            for dp in (d for d in range(1, world + 1) if world % d == 0):
                for tp in (t for t in range(1, world // dp + 1) if (world // dp) % t == 0):
                    pp = world // (dp * tp)
                    assert spans_nodes(dp, tp, pp, per_node, nodes) == \
                        _spans_by_enumeration(dp, tp, pp, per_node, nodes), (dp, tp, pp, per_node, nodes)
                    checked += 1
    assert checked > 500


def test_spans_nodes_is_instant_at_16384_gpus():
    spans_nodes.cache_clear()
    t0 = time.perf_counter()
    # Llama 3 405B: TP inside a node, DP and PP across nodes
    assert spans_nodes(128, 8, 16, 8, 2048) == (False, True, True)
    assert time.perf_counter() - t0 < 0.01


def test_llama3_405b_published_layout_is_costed_on_16384_h100():
    """Llama 3 (2024), section 3.3.2, Table 4: 16,384 H100s, TP 8, CP 1, PP 16, DP 128, 8K
    sequences, 16M tokens per batch = 2,048 sequences, micro-batch 1."""
    lay, pred = estimate("llama3-405b", "dgx-h100-80gb:2048", 2048,
                         "tp=8,cp=1,pp=16,dp=128,mbs=1,schedule=1f1b,recompute=selective,sp=1")
    assert (lay.tp, lay.pp, lay.dp, lay.num_microbatches, lay.world_size) == (8, 16, 128, 16, 16384)
    assert len(lay.stages) == 16 and pred.step_time_s > 0
    assert pred.breakdown_s["dp_sync"] > 0 and pred.breakdown_s["bubble"] > 0 and pred.breakdown_s["tp_comm"] > 0


def test_llama3_405b_chunks_of_the_embedding_and_the_head_alone():
    """The paper's first chunk holds only the embedding and its last only the head (section 3.3.2):
    stage_blocks 0/1/.../1/0 over pp 16 x vp 8 chunks; a 0 between other chunks is refused."""
    counts = "/".join(["0"] + ["1"] * 126 + ["0"])
    lay, pred = estimate("llama3-405b", "dgx-h100-80gb:2048", 2048,
                         f"tp=8,pp=16,dp=128,vp=8,mbs=1,sp=1,schedule=interleaved,stage_blocks={counts}")
    assert lay.stages[0] == ["embed"] and lay.stages[-1] == ["head"] and len(lay.stages) == 128
    assert pred.step_time_s > 0
    with pytest.raises(InputError, match="0 only for the first or last"):
        parse_layout_constraints("pp=4,stage_blocks=63/0/63/0")


def test_cp_0_is_refused():
    with pytest.raises(InputError, match="cp must be positive"):
        parse_layout_constraints("cp=0")


def test_cp_reads_as_a_layout_degree():
    assert parse_layout_constraints("tp=8,cp=1,pp=16,dp=128") == {"tp": 8, "cp": 1, "pp": 16, "dp": 128}


def test_solve_json_stays_clean_json_with_highs():
    """HiGHS prints a banner to the C-level stdout on first use: it must not reach --json output."""
    r = subprocess.run([sys.executable, "-m", "autoplan.cli", "solve", "--model", "gpt3-1.3b", "--cluster",
                        "dgx-a100-80gb:1", "--global-batch", "64", "--layout", "tp=2,pp=2", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["layout"]["pp"] == 2
