"""Probes 20261207j part 1's worker (under torchrun, 4 processes; PREREGISTRATION.md): the executor's data-parallel
steps (``E m``: dp4 mbs m x 4/m, validate's measure step) and the profile's whole-model case (``W m``: 4/m forward+
backward pairs at mbs m, gradients accumulating, as ``group_measure`` times it), and the executor's optimizer step
alone (``O``), built side by side, timed in turn with the order rotated. Rank 0 writes {condition: [the slowest
rank's seconds per round]}.

    python -m torch.distributed.run --standalone --nproc-per-node 4 part1_worker.py --spec SHAPE --plans P1 P2 P4 --out OUT
"""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json

import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, run_worker
from autoplan.execute.measure import _init, _timed_step, _trainer, turn_order
from autoplan.plan.plan import Plan


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True, help="the shape JSON the group job builds")
    ap.add_argument("--plans", nargs="+", required=True, help="dp plans, one per micro-batch size")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    def body() -> None:
        use_cuda = _init()
        plans = [Plan.load(p) for p in a.plans]
        per_rank = plans[0].layout.global_batch // plans[0].layout.dp
        steps = {}
        for p in plans:
            par, opt, one_step = _trainer(p, 0)
            steps[f"E{p.layout.mbs}"] = (par, opt, one_step)
        device = steps[next(iter(steps))][0].device
        job = gm._Job(gm.GroupProfileConfig(spec=a.spec, mbs_list=tuple(p.layout.mbs for p in plans)), device)
        first = None
        conds = {}
        for name, (_, _, one_step) in steps.items():
            conds[name] = one_step
        for p in plans:
            m = p.layout.mbs
            case = gm._whole_model_case(job, m, first.module if first is not None else None)
            first = first or case

            def whole(_i, c=case, n=per_rank // m) -> None:
                for _ in range(n):
                    c.backward(c.forward())
            conds[f"W{m}"] = whole
        par4, opt4, _ = steps[f"E{plans[-1].layout.mbs}"]
        toks = None

        def optimizer_only(i) -> None:
            nonlocal toks
            if toks is None:      # gradients of one par.step, kept and restored before each optimizer step
                from autoplan.execute.data import synthetic_batch
                from autoplan.models.registry import model_vocab
                tok, lab = synthetic_batch(0, plans[-1].layout.global_batch, plans[-1].training.seq_len,
                                           model_vocab(job.model), 0)
                par4.step(par4.batch_slice(tok), par4.batch_slice(lab))
                toks = [p.grad.detach().clone() for p in par4.parameters()]
            for p, g in zip(par4.parameters(), toks):
                p.grad = g.clone()
            par4.optimizer_step(opt4)
            opt4.zero_grad(set_to_none=True)
        conds["O"] = optimizer_only
        names = list(conds)
        got = {k: [] for k in names}
        for r in range(a.warmup + a.rounds):
            for k in turn_order(len(names), r):
                _, s = _timed_step(conds[names[k]], r, use_cuda, device)
                if r >= a.warmup:
                    got[names[k]].append(s)
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump(got, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
