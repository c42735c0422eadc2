import sys, torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, _Job, _measure_whole_model
dist.init_process_group("gloo")
cfg = GroupProfileConfig(spec=sys.argv[1], mbs_list=(1, 2, 4, 8))
job = _Job(cfg, torch.device("cpu"))
for rep in range(int(sys.argv[2])):
    timings, foreign = _measure_whole_model(job, cfg, torch.device("cpu"))
    if dist.get_rank() == 0:
        print(f"rep {rep}: DDP added ms " + ", ".join(f"mbs{g.mbs} {1000*(g.backward_sync_s-g.backward_s):.1f}" for g in timings)
              + " | plain fwd+bwd " + ", ".join(f"{1000*(g.forward_s+g.backward_s):.0f}" for g in timings) + f" | foreign {foreign:.2f}", flush=True)
dist.destroy_process_group()
