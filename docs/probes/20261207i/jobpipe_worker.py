"""Probes 20261207i part 3's worker (under torchrun, 4 processes): the profile's pipeline runs of one depth in a
fresh group job, as autoplan.execute.group_measure.measure_pipelines times them (in turn, each step after the
two references), with fixed chunks, at one micro-batch size; ``--no-reference``: the references replaced by
nothing (the steps still in turn, behind the same barriers). Rank 0 writes {"runs": [[pp, m, step_s], ...]}."""
if __name__ == "__main__":
    from autoplan.execute.launch import stop_quietly_until_ready
    stop_quietly_until_ready()

import argparse
import json

import torch
import torch.distributed as dist

import autoplan.execute.group_measure as gm
from autoplan.execute.launch import exit_worker, init_process_group, run_worker


class _NoWork:
    """Stands in for the whole-model reference case: forward, backward and zero_grad that do nothing."""
    class module:
        @staticmethod
        def zero_grad(set_to_none=True):
            return None

    def forward(self):
        return None

    def backward(self, _):
        return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--mbs", type=int, required=True)
    ap.add_argument("--pp", type=int, default=4)
    ap.add_argument("--chunks", required=True, help="units per chunk, e.g. 3,2,3,2")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    def body():
        torch.set_num_threads(1)
        init_process_group("gloo")
        cfg = gm.GroupProfileConfig(spec=a.spec, mbs_list=(a.mbs,))
        job = gm._Job(cfg, torch.device("cpu"))
        chunks = tuple(int(x) for x in a.chunks.split(","))
        gm.pipeline_cases = lambda world, units: [(a.pp, 1, "1f1b", a.pp), (a.pp, 1, "1f1b", 4 * a.pp)]
        gm.balanced_chunks = lambda unit_s, n: chunks
        if a.no_reference:
            gm._whole_model_case = lambda job, mbs, module=None: _NoWork()
        runs, _ = gm.measure_pipelines(job, cfg, job.device, None, [1.0] * sum(chunks))
        if dist.get_rank() == 0:
            with open(a.out, "w") as f:
                json.dump({"runs": [[t.pp, t.num_microbatches, t.step_s] for t in runs]}, f)
    return run_worker(body)


if __name__ == "__main__":
    exit_worker(main())
