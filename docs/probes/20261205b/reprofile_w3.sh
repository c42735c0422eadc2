#!/bin/bash
# Seed 20261205's workload 3 (the miss at 37748a8 and bfc7f83) profiled afresh three times, its four contenders
# predicted from each profile and timed in turn in one job (12 steps after 2 warm-up, medians).
# Run from an empty directory holding the workload's shape.json and cluster.json (fidelity's workdir w3).
set -e
for rep in 1 2 3; do
  mkdir -p r$rep && cd r$rep
  autoplan profile model --model ../shape.json --out model.json --mbs 1,2,4,8 --nproc 2 > prof.log 2>&1
  for L in "dp=2,mbs=8" "dp=2,mbs=4" "pp=2,vp=3,mbs=4" "pp=2,vp=2,mbs=4"; do
    autoplan solve --model model.json --cluster ../cluster.json --global-batch 16 --layout $L --out plan_$(echo $L | tr ',=' '__').json > /dev/null
  done
  torchrun --nproc-per-node 2 -m autoplan.execute.measure --plan plan_dp_2_mbs_8.json plan_dp_2_mbs_4.json \
      plan_pp_2_vp_3_mbs_4.json plan_pp_2_vp_2_mbs_4.json --steps 12 --warmup 2 --out inturn.json > m.log 2>&1
  cd ..
done
