"""Probes 20261207i part 8's worker (under torchrun, 4 processes): in one fresh group job, pp4 1F1B at mbs1 x16 and
mbs4 x4 (fixed stages), each timed after the two references of ``measure_pipelines`` (every rank runs the whole
model at the step's micro-batch, then rank 0 alone while the others wait) and without them, the four in turn, the
order rotated each round. With ``--splits`` (part 9): each split at both sizes, no references. Rank 0 writes
{condition: the slowest rank's median seconds}."""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json
import statistics as st

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker
from autoplan.execute.measure import turn_order
from autoplan.execute.pipeline_profile import pipeline_step


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--chunks", default="2,3,3,2")
    ap.add_argument("--splits", help="part 9: stage splits to compare, e.g. '2,3,3,2;3,2,3,2' (no references)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        device = torch.device("cpu")
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=(1, 4)), device)
        splits = [tuple(int(x) for x in sp.split(",")) for sp in (a.splits or a.chunks).split(";")]
        steps, refs = {}, {}
        for sizes in splits:
            for mbs, m in ((1, 16), (4, 4)):
                steps[(sizes, mbs)] = pipeline_step(job, 4, 1, "1f1b", m, mbs, device, sizes)[1]
        for mbs in () if a.splits else (1, 4):       # the references: part 8 only
            whole = gm._whole_model_case(job, mbs)

            def reference(w=whole) -> None:
                w.backward(w.forward())
                w.module.zero_grad(set_to_none=True)
            refs[mbs] = reference
        conds = ([(sizes, mbs, False) for sizes in splits for mbs in (1, 4)] if a.splits else
                 [(splits[0], mbs, with_refs) for mbs in (1, 4) for with_refs in (True, False)])
        got = {c: [] for c in conds}
        for r in range(a.warmup + a.rounds):
            for k in turn_order(len(conds), r):
                sizes, mbs, with_refs = conds[k]
                if with_refs:
                    gm._timed(refs[mbs], device)
                    gm._timed(lambda: refs[mbs]() if dist.get_rank() == 0 else None, device)
                t = gm._timed(steps[(sizes, mbs)], device)
                if r >= a.warmup:
                    got[conds[k]].append(t)
        mine = {(f"split {''.join(map(str, sz))} mbs{mbs}" if a.splits else f"mbs{mbs} {'refs' if w else 'none'}"):
                st.median(v) for (sz, mbs, w), v in got.items()}
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump({k: max(e[k] for e in every) for k in mine}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
