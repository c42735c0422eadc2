#!/bin/bash
# Exploratory: 160x8's first four in-turn plans timed in turn (12 rounds after 2), pinned and not, alternating.
cd /work/main
D=/work/exp/s27/shapes3/160x8/w0; O=/work/exp/s27/pinned; mkdir -p $O
for k in 1 2 3; do
  for mode in free pin; do
    flag=""; [ $mode = pin ] && flag="--pin"
    PYTHONPATH=. python -m torch.distributed.run --standalone --nproc-per-node 4 docs/probes/20261207k/pinned_measure.py $flag \
      --plan $D/plan-in-turn-0.json $D/plan-in-turn-1.json $D/plan-in-turn-2.json $D/plan-in-turn-3.json \
      --steps 12 --warmup 2 --out $O/$mode$k.json > $O/$mode$k.log 2>&1
    echo "$mode $k rc $? $(date -u +%H:%M:%S)"
  done
done
