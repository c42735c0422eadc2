"""The profile's cases first (measure_in_groups, no pipelines), then whole-model rounds as wm_noise.py."""
import json, os, sys, time
import torch, torch.distributed as dist
from autoplan.execute.group_measure import GroupProfileConfig, measure_in_groups, WHOLE_MODEL
from wm_noise import MBS, whole_model_rounds
shape, out = sys.argv[1], sys.argv[2]
R = int(os.environ.get("ROUNDS", 14)); FIRST = os.environ.get("FIRST") == "1"
dist.init_process_group("gloo"); cpu = torch.device("cpu")
cfg = GroupProfileConfig(spec=shape, mbs_list=MBS, pipelines=False)
pre = whole_model_rounds(cfg, R) if FIRST else None
t0 = time.time()
res, _ = measure_in_groups(cfg, cpu)
wm = {g.mbs: (g.forward_s + g.backward_s) / g.mbs for g in res[WHOLE_MODEL]}
t1 = time.time()
post = whole_model_rounds(cfg, R)
if dist.get_rank() == 0:
    json.dump({"mbs": MBS, "rows": post, "pre": pre, "profile_whole": wm, "profile_s": t1 - t0}, open(out, "w"))
    print("profile whole per-sample ms", {k: round(v * 1e3, 1) for k, v in wm.items()}, "r4/2 %.3f" % (wm[4] / wm[2]), "profile %.0f s" % (t1 - t0))
dist.destroy_process_group()
