import sys, shutil, os
from dataclasses import replace
import autoplan.plan.pipeline_costs as pc
from autoplan.profile.formats import ModelProfile
src, dst = sys.argv[1], sys.argv[2]
if sys.argv[3] == "noscale":
    pc.on_layer_scale = lambda profile, runs: list(runs)
os.makedirs(dst, exist_ok=True)
p = ModelProfile.load(f"{src}/model.json")
p.pipeline_costs = [c2 for c2 in (pc.fit_pipeline_costs(p, c.world, c.pp) for c in p.pipeline_costs) if c2]
p.save(f"{dst}/model.json")
