"""Probes 20261207i part 5 (exploratory, stored runs only): is the trend by micro-batch (part 2) a fixed cost per
micro-batch that a launch pays and the prediction lacks?

    PYTHONPATH=. python docs/probes/20261207i/per_microbatch.py > docs/probes/20261207i/per_microbatch.txt

For each family of a stored workload (seeds 20261250-60; layouts that differ only in micro-batch size and count)
with pipelines, the pooled in-turn medians of its smallest and largest micro-batch: the measured-minus-predicted
seconds of the smallest minus that of the largest, over the difference in micro-batch slots of a pipeline rank
(m + pp - 1 under 1F1B, m vp + pp - 1 interleaved): the seconds a launch pays per slot beyond the prediction,
beside the model's own per-slot time (the chosen rank's step over its slots). Constant in milliseconds across
models: a fixed per-micro-batch cost (Python, messages); a constant share of the slot time: compute."""
import collections
import math
import os
import statistics as st
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import family, in_turn_residuals, stored_workloads   # noqa: E402


def slots(L):
    return (L.num_microbatches * L.vp if L.vp > 1 else L.num_microbatches) + L.pp - 1


rows = collections.defaultdict(list)
for wl in stored_workloads("/work/exp/s2*/d*/w*"):
    d, res = in_turn_residuals(wl)
    fams = collections.defaultdict(list)
    for L, x, pr in res:
        if L.pp > 1:
            fams[family(L)].append((L, pr, pr.step_time_s * math.expm1(x)))     # measured - predicted, s
    for members in fams.values():
        if len({m[0].mbs for m in members}) < 2:
            continue
        lo = min(members, key=lambda x: x[0].mbs)
        hi = max(members, key=lambda x: x[0].mbs)
        ds = slots(lo[0]) - slots(hi[0])
        if ds <= 0:
            continue
        per_slot_ms = (lo[2] - hi[2]) / ds * 1e3
        slot_ms = hi[1].step_time_s / slots(hi[0]) * 1e3
        rows[d["workload"]["world"]].append((per_slot_ms, slot_ms, os.path.relpath(wl, "/work/exp"), lo[0].short(),
                                             hi[0].short()))
for world in sorted(rows):
    r = rows[world]
    x = [a for a, _, _, _, _ in r]
    rel = [a / b for a, b, _, _, _ in r]
    print(f"world {world}: {len(r)} pipeline families; extra per micro-batch slot {st.median(x):+.2f} ms median "
          f"(quartiles {st.quantiles(x, n=4)[0]:+.2f}, {st.quantiles(x, n=4)[2]:+.2f}); as a share of the largest "
          f"micro-batch's predicted slot {st.median(rel):+.1%} median (quartiles {st.quantiles(rel, n=4)[0]:+.1%}, "
          f"{st.quantiles(rel, n=4)[2]:+.1%})")
    small = [a for a, b, _, _, _ in r if b < st.median([b for _, b, _, _, _ in r])]
    large = [a for a, b, _, _, _ in r if b >= st.median([b for _, b, _, _, _ in r])]
    print(f"  per slot, families with a short slot: {st.median(small):+.2f} ms; with a long slot: {st.median(large):+.2f} ms")
