"""Whole-model per-sample times at mbs 1,2,4 in turn, many rounds, every rank's time kept."""
import json, os, sys
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _whole_model_case, _pairs

MBS = (1, 2, 4)


def whole_model_rounds(cfg, rounds, cpu=torch.device("cpu")):
    """``rounds`` rounds of the whole model at each of MBS in turn (after two untimed each): per round, per size,
    every rank's seconds per sample."""
    job = _Job(cfg, cpu)
    first = _whole_model_case(job, MBS[0]); cases = [first] + [_whole_model_case(job, m, first.module) for m in MBS[1:]]
    for c in cases:
        for _ in range(2):
            dist.barrier(); _pairs(c, cpu, 1)
    rows = []
    for r in range(rounds):
        row = []
        for c, m in zip(cases, MBS):
            dist.barrier(); f, b = _pairs(c, cpu, 1)
            t = torch.tensor([f + b], dtype=torch.float64); g = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
            dist.all_gather(g, t); row.append([float(x) / m for x in g])
        rows.append(row)
    return rows


if __name__ == "__main__":
    shape, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rows = whole_model_rounds(GroupProfileConfig(spec=shape, mbs_list=MBS), int(os.environ.get("ROUNDS", 30)))
    if dist.get_rank() == 0:
        json.dump({"mbs": MBS, "rows": rows}, open(out, "w"))
    dist.destroy_process_group()
