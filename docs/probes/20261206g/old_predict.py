"""Predict a stored fidelity workload's layouts with an older autoplan on PYTHONPATH (9ff4cd4 here): its profile
loaded after dropping the keys the older reader refuses, its pipeline runs fitted again by the older
``fit_pipeline_costs`` (``../20261205d/retro.py``'s refitted problem); prints old and current predictions beside
the once-measured and first in-turn times.

    PYTHONPATH=/path/to/worktree-at-9ff4cd4 python docs/probes/20261206g/old_predict.py /work/exp/s23/shape192x6/w0
"""
import json
import os
import re
import statistics as st
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import load_runs, refitted_problem   # noqa: E402

from autoplan.errors import InputError   # noqa: E402
from autoplan.plan.api import estimate_problem   # noqa: E402
from autoplan.plan.plan import Layout   # noqa: E402
from autoplan.profile.formats import ModelProfile   # noqa: E402


def node_at(obj, path: str):
    """The part of a profile's JSON at a reader's path such as ``pipeline_costs[0]`` or ``a.b[2].c``"""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        obj = obj[int(part[1:-1])] if part.startswith("[") else obj[part]
    return obj


def loadable_copy(path: str) -> tuple[str, list]:
    """(a copy of the profile at ``path`` that the reader on PYTHONPATH loads, what was dropped): each key it calls
    unknown removed, from every item of the list where one item had it"""
    prof, out, dropped = json.load(open(path)), os.path.join(tempfile.mkdtemp(), "model.json"), []
    while True:
        json.dump(prof, open(out, "w"))
        try:
            ModelProfile.load(out)
            return out, dropped
        except InputError as e:
            m = re.search(r"malformed model profile: (.*?): unknown keys '(.*?)'", str(e))
            if not m:
                raise
            where, keys = m.group(1), m.group(2).split(", ")
            node = node_at(prof, re.sub(r"\[\d+\]$", "", where))
            removed = [item.pop(k) for item in (node if isinstance(node, list) else [node]) for k in keys if k in item]
            if not removed:
                raise
            dropped.append((where, keys))


wl = sys.argv[1]
cleaned, dropped = loadable_copy(f"{wl}/model.json")
print("dropped", dropped)
d, once, job1, _ = load_runs(wl)
pb = refitted_problem(wl, d, model_path=cleaned)
eo, ec = [], []
for k, r in once.items():
    L = Layout.from_dict(r["layout"])
    pred, meas = estimate_problem(pb, L)[1].step_time_s, r["measured"]["step_time_s"]
    in_turn = job1.get(k, meas)
    eo.append(abs(pred / meas - 1))
    ec.append(abs(pred / in_turn - 1))
    print(f"{L.short():58s} old {pred:.3f} now {r['predicted']['step_time_s']:.3f} once {meas:.3f} in-turn {in_turn:.3f}")
print(f"9ff4cd4 code: error over once {st.mean(eo):.1%}, over the in-turn table {st.mean(ec):.1%}")
