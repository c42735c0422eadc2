"""Re-predict every stored fidelity workload with the current code; judge the model's pick on the
pooled in-turn medians (confirmed + judged jobs, geometric mean), and on job 1 alone."""
import json, sys, glob, os, statistics as st, math, tempfile
import autoplan.plan.pipeline_costs as pc
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.profile.formats import ModelProfile
def key(l): return Layout.from_dict(l).short()
def stored_workloads(pattern='/work/exp/s1*/d*/w*'):
    """The stored fidelity workload directories that hold a runs.json."""
    return sorted(w for w in glob.glob(pattern) if os.path.exists(w + '/runs.json'))
def load_runs(wl):
    """(runs.json, {layout: its once-measured run}, {layout: job 1's in-turn median}, {layout: job 2's})"""
    d = json.load(open(f"{wl}/runs.json"))
    once = {key(r["layout"]): r for r in d["runs"]}
    j1 = {key(r["layout"]): r["measured"]["step_time_s"] for r in d.get("confirmed", [])}
    j2 = {key(r["layout"]): r["measured"]["step_time_s"] for r in d.get("judged", [])}
    return d, once, j1, j2
def pooled(j1, j2):
    """The two in-turn jobs' medians pooled (geometric mean), or job 1's where job 2 timed fewer than two"""
    both = [k for k in j1 if k in j2]
    return {k: math.sqrt(j1[k] * j2[k]) for k in both} if len(both) >= 2 else dict(j1)
def problem(wl, d, model_path=None):
    """The planning problem of a stored workload (its model profile, or ``model_path``)"""
    return make_problem(model_path or f"{wl}/model.json", f"{wl}/cluster.json", d["workload"]["global_batch"],
                        memory_per_device_bytes=2**30)
def judged(wl):
    """(once-measured runs, the pooled in-turn medians, the planning problem of the stored profiles) of one
    stored workload"""
    d, once, j1, j2 = load_runs(wl)
    return once, pooled(j1, j2), problem(wl, d)
def refitted_problem(wl, d, refit=True, model_path=None):
    """The planning problem of a stored workload, its profile (or ``model_path``'s) with the pipeline costs
    fitted again from its runs by the code on the path (``refit``; else as stored), through a temporary copy"""
    p = ModelProfile.load(model_path or f"{wl}/model.json")
    if refit:
        p.pipeline_costs = [c for c in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in p.pipeline_costs) if c]
    return problem(wl, d, saved(p))
def saved(p):
    """The path of a temporary copy of model profile ``p`` (for what takes a profile file)"""
    path = os.path.join(tempfile.mkdtemp(), "model.json")
    p.save(path)
    return path
def log_residuals(wl):
    """(runs.json, [(layout, log(measured / predicted), the Prediction)]) of a stored workload's once-measured
    layouts, predicted on its refitted problem (:func:`refitted_problem`)"""
    d, once, _, _ = load_runs(wl)
    pb = refitted_problem(wl, d)
    rows = []
    for r in once.values():
        L = Layout.from_dict(r["layout"])
        _, pr = estimate_problem(pb, L)
        rows.append((L, math.log(r["measured"]["step_time_s"] / pr.step_time_s), pr))
    return d, rows
def in_turn_residuals(wl):
    """(runs.json, [(layout, log(pooled in-turn median / predicted), the Prediction)]) of a stored workload's
    layouts that its in-turn jobs timed (:func:`log_residuals`, :func:`pooled`)"""
    d, rows = log_residuals(wl)
    _, _, j1, j2 = load_runs(wl)
    pool = pooled(j1, j2)
    return d, [(L, math.log(pool[L.short()] / pr.step_time_s), pr) for L, _, pr in rows if L.short() in pool]
def family(L):
    """The layouts that differ from ``L`` only in micro-batch size and count share this key"""
    return (L.dp, L.tp, L.pp, L.vp, L.zero, L.recompute, L.cp)
def centred_residuals(wl):
    """[(layout, log(measured / predicted) minus the workload's mean)] of a stored workload's once-measured
    layouts (:func:`log_residuals`)"""
    _, rows = log_residuals(wl)
    mid = st.mean(x for _, x, _ in rows)
    return [(L, x - mid) for L, x, _ in rows]
def argmin_pick(pred):
    """The model's pick among the measured layouts, as fidelity does: the predicted fastest.
    ``pred``: {layout key: (predicted step s, Layout)}"""
    return min(pred, key=lambda k: pred[k][0])
def judge_workload(wl, refit=True, pick=argmin_pick, model_path=None):
    """(wl, the pick's key, its miss on the pooled in-turn medians, on job 1 alone, the mean abs. error of
    the once-measured layouts) of one stored workload, predicted on its refitted problem
    (:func:`refitted_problem`; ``model_path``: another profile of it), the pick made by ``pick``
    ({key: (predicted s, Layout)} -> key)"""
    d, once, j1, j2 = load_runs(wl)
    pool = pooled(j1, j2)
    pb = refitted_problem(wl, d, refit, model_path)
    pred={}
    for k,r in once.items():
        L = Layout.from_dict(r["layout"])
        _, pr = estimate_problem(pb, L)
        pred[k]=(pr.step_time_s, L)
    ch=pick(pred)
    errs=[pred[k][0]/once[k]["measured"]["step_time_s"]-1 for k in once]
    miss = pool[ch]/min(pool.values())-1 if ch in pool else float('nan')
    m1 = j1[ch]/min(j1.values())-1 if ch in j1 else float('nan')
    return wl, ch, miss, m1, st.mean(map(abs,errs))
def summary(res):
    """(n, within 5% pooled, within 5% by job 1, mean error, mean pooled miss) of :func:`judge_workload` rows"""
    return (len(res), sum(1 for r in res if r[2]<=0.05), sum(1 for r in res if r[3]<=0.05),
            st.mean(r[4] for r in res), st.mean(r[2] for r in res if r[2]==r[2]))
def evaluate(wls, refit=True, verbose=True):
    res=[]
    for wl in wls:
        res.append(judge_workload(wl, refit))
        _, ch, miss, m1, err = res[-1]
        if verbose: print(f"{wl[-18:]:18s} err {err:5.1%} pick pooled {miss:+6.1%} job1 {m1:+6.1%}  {ch}", flush=True)
    n, ok, ok1, err, miss = summary(res)
    print(f"n={n} within5 pooled {ok} job1 {ok1}; mean err {err:.1%}; mean pooled miss {miss:+.2%}")
    return res
if __name__=="__main__":
    evaluate(sorted(w for a in sys.argv[1:] for w in stored_workloads(a)))
