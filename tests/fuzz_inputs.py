"""Hypothesis strategies for the fuzz tests: valid artifacts of each kind, and ways to break them.

    mutated_doc(MODEL_DOCS)        a model profile dict with 1-3 random mutations
    corrupted_text(doc)            its JSON text truncated, spliced, deeply nested, ...
    layout_text()                  --layout strings from the grammar KEY=VALUE[,KEY=VALUE...] and noise

A mutation picks a node of the JSON tree and replaces it with junk (NaN, inf, negative, huge and
bool numbers, strings, lists, objects, null), deletes it, adds an unknown key beside it, scales a
number, replaces it with a plausible but extreme number (0, 1e-12, 2**61: passes the type checks,
strains the cost model), or changes the schema version or kind. No torch needed.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from planner_instances import random_cluster, random_model_profile

REPO = Path(__file__).resolve().parents[1]


def _model_docs() -> list[dict]:
    rng = random.Random(3)
    synthetic = random_model_profile(rng, n_blocks=3)
    synthetic.shape["heads"] = synthetic.shape["kv_heads"] = 4
    return [synthetic.to_dict(), json.loads((REPO / "profiles" / "gpt-small.cpu.json").read_text())]


def _cluster_docs() -> list[dict]:
    rng = random.Random(4)
    return [random_cluster(rng, world=4, memory_bytes=2**30).to_dict(),
            json.loads((REPO / "profiles" / "cpu-4proc.json").read_text()),
            random_cluster(rng, world=4, memory_bytes=2**30, num_nodes=2).to_dict()]


MODEL_DOCS = _model_docs()
CLUSTER_DOCS = _cluster_docs()
SHAPE_DOCS = [{"layers": 4, "hidden": 64, "heads": 4, "kv_heads": 4, "ffn_hidden": 256, "vocab": 256, "seq_len": 32},
              {"layers": 2, "hidden": 128, "heads": 8, "kv_heads": 2, "ffn_hidden": 384, "vocab": 1000, "seq_len": 16}]

EDGE_NUMBERS = [0, -1, 1, 2, 3, 7, 2**31, 2**53 + 1, 2**63, 10**30, 10**400, -10**20,
                0.0, -0.0, 0.5, 1.5, 1e-300, 5e-324, 1e308, -1e308, math.nan, math.inf, -math.inf]
"""numbers that break naive loaders: zero, negatives, floats where ints belong, beyond int64 and
float range (10**400 is a valid JSON integer), NaN and infinities (Python's json reads them)"""

junk = st.one_of(
    st.none(), st.booleans(), st.sampled_from(EDGE_NUMBERS),
    st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.sampled_from(["", "1", "nan", "inf", "fp32", "block", "embed", "1f1b", "none"]),
    st.lists(st.sampled_from([0, 1, -1, "a", None, 2.5]), max_size=3),
    st.dictionaries(st.sampled_from(["a", "mbs", "tp", "1", "latency_s"]), st.sampled_from([0, 1, -1, "x"]),
                    max_size=2),
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON tree (keys and list indices), the root excluded."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(prefix + (k,))
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append(prefix + (i,))
            out += _paths(v, prefix + (i,))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


@st.composite
def mutated_doc(draw, bases: list[dict]) -> dict:
    """One of ``bases`` (deep-copied) with 1-3 mutations."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "unknown_key", "scale", "version",
                                   "plausible", "plausible", "plausible"]))
        if op == "version" or not paths:
            key = draw(st.sampled_from(["schema_version", "kind"]))
            doc[key] = draw(st.sampled_from([0, 2, 99, -1, "1", 1.0, True, None, "plan", "model_profile",
                                             "cluster_profile", 10**400]))
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        key = path[-1]
        if op == "replace":
            parent[key] = draw(junk)
        elif op == "delete":
            del parent[key]
        elif op == "unknown_key":
            target = parent[key] if isinstance(parent[key], dict) else parent
            if isinstance(target, dict):
                target[draw(st.sampled_from(["extra", "x_unknown", "mbs", "tp", "stages", "1"]))] = draw(junk)
            else:
                parent[key] = {"unexpected": parent[key]}
        elif op == "plausible":     # a number that passes type checks but strains the cost model
            v = parent[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                parent[key] = draw(junk)
            elif isinstance(v, int):
                parent[key] = draw(st.sampled_from([0, 1, 2, 3, 5, 64, 2**20, 2**40, 2**61]))
            else:
                parent[key] = draw(st.sampled_from([0.0, 1e-12, 1e-3, 1.0, 1e6, 1e12, 1e29]))
        elif op == "scale":
            v = parent[key]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                factor = draw(st.sampled_from([-1, 0, 1e6, 1e300, 2**64, math.nan, 0.5]))
                try:
                    parent[key] = v * factor
                except OverflowError:
                    parent[key] = math.inf
            else:
                parent[key] = draw(junk)
    return doc


@st.composite
def corrupted_text(draw, doc: dict) -> bytes:
    """``doc`` as JSON text, then broken at the byte level (or replaced by something else)."""
    text = json.dumps(doc).encode()
    how = draw(st.sampled_from(["truncate", "splice", "nest", "bigint", "bom", "empty", "binary", "not_object",
                                "duplicate_key", "nan_literal"]))
    if how == "truncate":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if how == "splice":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at + 1:]
    if how == "nest":
        depth = draw(st.sampled_from([10, 1000, 100000]))
        return b"[" * depth + b"]" * depth
    if how == "bigint":
        return b'{"schema_version": ' + b"9" * draw(st.sampled_from([20, 400, 5000])) + b"}"
    if how == "bom":
        return b"\xef\xbb\xbf" + text
    if how == "empty":
        return draw(st.sampled_from([b"", b" ", b"\n", b"null", b"{}"]))
    if how == "binary":
        return draw(st.binary(min_size=1, max_size=64))
    if how == "not_object":
        return draw(st.sampled_from([b"[]", b"1", b'"plan"', b"true", b"[{}]", b"NaN"]))
    if how == "duplicate_key":
        return text[:-1] + b', "kind": "something_else"}'
    return text.replace(b"0.", b"NaN", 1) if b"0." in text else text + b"NaN"


# -- option strings --------------------------------------------------------------------------------

LAYOUT_KEYS = ["dp", "tp", "pp", "vp", "mbs", "num_microbatches", "m", "microbatches", "zero", "sp", "sync_every",
               "recompute", "schedule", "grad_compression"]
LAYOUT_VALUES = ["0", "1", "2", "4", "-1", "3", "99999999999999999999", "1.5", "", "none", "full", "selective",
                 "gpipe", "1f1b", "interleaved", "fp16", "powersgd", "x", "２", "1e3", " 2 ", "0x10"]


@st.composite
def layout_text(draw) -> str:
    """``--layout`` strings: mostly grammatical KEY=VALUE lists, some noise."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=20))
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.one_of(st.sampled_from(LAYOUT_KEYS), st.text(max_size=4)))
        sep = draw(st.sampled_from(["=", "=", "=", "", "==", ":"]))
        value = draw(st.one_of(st.sampled_from(LAYOUT_VALUES), st.integers(-5, 10**6).map(str)))
        parts.append(f"{key}{sep}{value}")
    return draw(st.sampled_from([",", ", ", ",,"])).join(parts)


@st.composite
def size_text(draw) -> str:
    """Byte sizes such as ``48MiB``: numbers, units, spacing, and what is not a size."""
    number = draw(st.one_of(st.integers(-10, 10**6).map(str), st.sampled_from(
        ["0", "1.5", ".5", "1.", "1e3", "-1", "9" * 400, "nan", "inf", "", " 12 ", "٣"])))
    unit = draw(st.sampled_from(["", "B", "b", "KB", "KiB", "kib", "MB", "MiB", "GB", "GiB", "TB", "TiB", "PiB",
                                 "mb ", " MiB", "M", "bytes"]))
    return number + unit if draw(st.integers(0, 9)) else draw(st.text(max_size=10))


@st.composite
def int_list_text(draw) -> str:
    """``--mbs 1,2,4`` style lists."""
    items = draw(st.lists(st.one_of(st.integers(-3, 10**7).map(str), st.sampled_from(["", " ", "x", "1.5", "9" * 30])),
                          max_size=4))
    return ",".join(items)


@st.composite
def cluster_spec_text(draw) -> str:
    name = draw(st.sampled_from(["dgx-a100-80gb", "dgx-h100-80gb", "dgx-h200-141gb", "dgx-v100", "", "x.json"]))
    count = draw(st.sampled_from(["", ":", ":0", ":1", ":2", ":-1", ":1.5", ":²", ":99999999999", ":16", ": 2"]))
    return name + count


@st.composite
def model_spec_text(draw) -> str:
    return draw(st.one_of(
        st.sampled_from(["gpt-tiny", "gpt-small", "gpt3-175b", "llama3-8b", "gpt-nonexistent", "", "hf:", "hf:x",
                         "hf:gpt2-tiny", "hf:llama-tiny", "missing.json", "missing.py:f", ":", "a:b:c"]),
        st.builds(lambda name, pairs: "hf:" + ",".join([name, *pairs]),
                  st.sampled_from(["gpt2-tiny", "llama-tiny", "llama", "gpt2"]),
                  st.lists(st.builds(lambda k, v: f"{k}={v}",
                                     st.sampled_from(["layers", "hidden", "heads", "kv_heads", "vocab", "seq_len",
                                                      "ffn_hidden", "n_layer", "bogus", ""]),
                                     st.sampled_from(["0", "-1", "2", "4", "64", "abc", "1.5", "inf", "nan", "true",
                                                      "99999999999999"])), max_size=3))))


PLAUSIBLE_INTS = [0, 1, 2, 3, 5, 64, 2**20, 2**40, 2**61]
PLAUSIBLE_FLOATS = [0.0, 1e-12, 1e-3, 1.0, 1e6, 1e12, 1e29]


@st.composite
def plausible_doc(draw, bases: list[dict]) -> dict:
    """One of ``bases`` with 1-4 of its numbers replaced by extreme values of the same type: mostly
    accepted by the loaders, so what follows (the cost model) sees them."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    numeric = [p for p in _paths(doc) if isinstance(_parent(doc, p)[p[-1]], (int, float))
               and not isinstance(_parent(doc, p)[p[-1]], bool) and p[-1] != "schema_version"]
    for path in draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=4)):
        parent = _parent(doc, path)
        parent[path[-1]] = draw(st.sampled_from(PLAUSIBLE_INTS if isinstance(parent[path[-1]], int)
                                                else PLAUSIBLE_FLOATS))
    return doc
