import sys, torch, torch.distributed as dist, os
from autoplan.execute.group_measure import GroupProfileConfig, measure_in_groups, WHOLE_MODEL
dist.init_process_group("gloo"); cpu = torch.device("cpu")
res, _ = measure_in_groups(GroupProfileConfig(spec=sys.argv[1], mbs_list=(1, 2, 4), pipelines=False), cpu)
wm = {g.mbs: (g.forward_s + g.backward_s) / g.mbs for g in res[WHOLE_MODEL]}
if dist.get_rank() == 0:
    print("FIRST=%s whole ms" % os.environ.get("AUTOPLAN_WM_FIRST"), {k: round(v * 1e3, 1) for k, v in wm.items()}, "r4/2 %.3f r1/2 %.3f" % (wm[4] / wm[2], wm[1] / wm[2]), flush=True)
dist.destroy_process_group()
