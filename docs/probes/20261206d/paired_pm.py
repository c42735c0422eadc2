"""Arm pipe_mbs against head on the same measured layouts (the pre-registered paired judge).

    PYTHONPATH=<worktree of pipe-mbs> python docs/probes/20261206d/paired_pm.py '/work/exp/s21/d20261253/w*'

Each stored workload's layouts re-predicted twice: with its model profile as measured (pipelines at two
micro-batch sizes: the arm) and with the larger size's pipeline runs and costs removed (what head fits:
the runs at the smallest size only). The pick (the predicted fastest of the measured layouts) judged on
job 1's in-turn medians and on both jobs pooled (../20261205d/retro.py's judge_workload, profiles as stored)."""
import os, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "20261205d"))
from retro import judge_workload, stored_workloads   # noqa: E402
from autoplan.profile.formats import ModelProfile   # noqa: E402


def head_profile(wl):
    """The workload's profile with only the smallest size's pipeline runs and costs (head's), saved to a temp file."""
    p = ModelProfile.load(f"{wl}/model.json")
    lo = min((t.mbs for t in p.pipeline_timings), default=None)
    p.pipeline_timings = [t for t in p.pipeline_timings if t.mbs == lo]
    p.pipeline_costs = [c for c in p.pipeline_costs if c.mbs == lo]
    path = os.path.join(tempfile.mkdtemp(), "model.json")
    p.save(path)
    return path


def main(patterns):
    wls = sorted(w for a in patterns for w in stored_workloads(a))
    tot = {"arm": [0, 0, 0.0], "head": [0, 0, 0.0]}
    for wl in wls:
        for name, path in (("arm", None), ("head", head_profile(wl))):
            _, ch, miss, m1, err = judge_workload(wl, refit=False, model_path=path)
            tot[name][0] += miss <= 0.05
            tot[name][1] += m1 <= 0.05
            tot[name][2] += err
            print(f"{name:4s} {wl[-18:]:18s} err {err:5.1%} pick pooled {miss:+6.1%} job1 {m1:+6.1%}  {ch}", flush=True)
    for name, (ok, ok1, err) in tot.items():
        print(f"== {name}: {len(wls)} workloads, within 5% pooled {ok}, job 1 {ok1}; mean error {err / len(wls):.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
