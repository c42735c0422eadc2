"""Probes 20261207l part 2's worker (under torchrun, 4 processes; PREREGISTRATION.md): the composition factor
f_c(m) = whole model's in-group forward+backward / sum over its units of their in-group forward+backward, two ways
in one job:

  A  as `profile model --nproc` takes it: the whole model first (its sizes in turn, with the DDP cases, as
     group_measure._measure_whole_model does), then each layer kind's case on its own (group_measure.time_pairs);
  B  the whole model's cases and every layer kind's cases at every size timed in turn in one call
     (group_measure.time_pairs_in_turn), so that a drift of the machine falls on both sides of the ratio alike.

Rank 0 writes {"A": {mbs: f_c}, "B": {mbs: f_c}}.

    python -m torch.distributed.run --standalone --nproc-per-node 4 part2_worker.py --spec SHAPE.json --out OUT.json
"""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mbs", default="1,2,4")
    a = ap.parse_args()
    sizes = tuple(int(x) for x in a.mbs.split(","))

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        device = torch.device("cpu")
        cfg = gm.GroupProfileConfig(spec=a.spec, mbs_list=sizes)
        job = gm._Job(cfg, device)
        kind_of = {u: k for k in job.kinds for u in job.model.unit_names() if u in k.units}
        units = job.model.unit_names()

        def f_c(whole: dict, layer: dict) -> dict:
            return {m: whole[m] / sum(layer[(kind_of[u].name, m)] for u in units) for m in sizes}

        # A: the profile's order
        wt = gm._measure_whole_model(job, cfg, device)[0]
        whole_a = {g.mbs: g.forward_s + g.backward_s for g in wt}
        layer_a = {}
        for k in job.kinds:
            for m in sizes:
                fwd, bwd = gm.time_pairs(gm._make_case(job, k, m), cfg, device)
                layer_a[(k.name, m)] = fwd + bwd
        # B: all in turn
        first = gm._whole_model_case(job, sizes[0])
        cases = [first] + [gm._whole_model_case(job, m, first.module) for m in sizes[1:]]
        keys = [(k.name, m) for k in job.kinds for m in sizes]
        cases += [gm._make_case(job, k, m) for k in job.kinds for m in sizes]
        timed = gm.time_pairs_in_turn(cases, cfg, device)
        whole_b = {m: sum(timed[i]) for i, m in enumerate(sizes)}
        layer_b = {key: sum(t) for key, t in zip(keys, timed[len(sizes):])}
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump({"A": f_c(whole_a, layer_a), "B": f_c(whole_b, layer_b),
                           "whole": {"A": whole_a, "B": whole_b}}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
