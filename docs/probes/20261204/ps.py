"""Prototype: a pipeline on shared cores by processor sharing over the schedule's own order."""
import json, sys
from autoplan.plan.api import make_problem, estimate_problem
from autoplan.plan.plan import Layout
from autoplan.plan.coefficients import costs_for_layout
from autoplan.plan.timeline import chunk_times
from autoplan.plan.schedules import schedule_order
from autoplan.plan.pipeline_costs import pipeline_costs_for, per_chunk_s

def ps_makespan(chunks, pp, vp, m, schedule, cores, slowdown):
    n_chunks = pp * vp
    orders = [schedule_order(schedule, pp=pp, vp=vp, m=m, rank=r) for r in range(pp)]
    def dur(op):
        k, j, i = op; c = chunks[j]
        return (c.forward_s + c.send_s) if k == "F" else (c.recv_grad_s + c.recompute_s + c.backward_s)
    def dep(op):
        k, j, i = op
        if k == "F": return ("F", j - 1, i) if j > 0 else None
        return ("B", j + 1, i) if j < n_chunks - 1 else ("F", j, i)
    done = set(); pos = [0]*pp; rem = [None]*pp; t = 0.0
    def start(r):
        while pos[r] < len(orders[r]):
            op = orders[r][pos[r]]; d = dep(op)
            if d is None or d in done:
                rem[r] = dur(op) / slowdown   # alone seconds
                return
            rem[r] = None; return
        rem[r] = None
    for r in range(pp): start(r)
    while any(pos[r] < len(orders[r]) for r in range(pp)):
        act = [r for r in range(pp) if rem[r] is not None]
        if not act: raise RuntimeError("deadlock")
        rate = min(1.0, cores / len(act))
        dt = min(rem[r] for r in act) / rate
        t += dt
        fin = []
        for r in act:
            rem[r] -= dt * rate
            if rem[r] <= 1e-12: fin.append(r)
        for r in fin:
            done.add(orders[r][pos[r]]); pos[r] += 1; rem[r] = None
        for r in range(pp):
            if rem[r] is None: start(r)
    return t

if __name__ == '__main__':
    wd = sys.argv[1]; gb = 16
    d = json.load(open("/work/exp/f16/w1/runs.json"))
    pb = make_problem(f"{wd}/model.json", f"{wd}/cluster.json", gb, memory_per_device_bytes=2**30)
    truth = {0: 1.142, 1: 1.113, 2: 1.078}
    for i in range(10):
        lay = Layout.from_dict(d["confirmed"][i]["layout"])
        pred = estimate_problem(pb, lay); pred = pred[1] if isinstance(pred, tuple) else pred
        costs = costs_for_layout(pb.profile, pb.cluster, lay, pb.train)
        ch = chunk_times(pb.profile, lay, costs)
        pipe = pipeline_costs_for(pb.profile, pb.cluster.world_size, lay.pp)
        a = per_chunk_s(pipe, lay)
        from dataclasses import replace
        ch = [replace(c, forward_s=c.forward_s + a/2, backward_s=c.backward_s + a/2) for c in ch]
        s = pipe.slowdown; world = pb.cluster.world_size
        cores = world / s
        # dp>1: several pipelines share the cores; each pipeline gets cores / dp
        mk = ps_makespan(ch, lay.pp, lay.vp, lay.num_microbatches, lay.schedule, cores / lay.dp, s)
        rest = pred.breakdown_s.get("dp_sync", 0) + pred.breakdown_s.get("optimizer", 0) + pipe.per_step_s
        ps = mk + rest
        t = truth.get(i, d["confirmed"][i]["measured"]["step_time_s"])
        print(f"{lay.short():58s} model {pred.step_time_s:.3f} ({pred.step_time_s/t-1:+.1%})  ps {ps:.3f} ({ps/t-1:+.1%})  meas {t:.3f}{' *' if i in truth else ''}")
