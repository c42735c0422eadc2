#!/bin/bash
cd /work/wt-drift
export PYTHONPATH=/work/wt-drift
for s in 192x6 160x8; do
  echo "== part 3 $s start $(date -u +%H:%M:%S)"
  python benchmarks/fidelity.py --shape benchmarks/shapes/issue24-$s.json --global-batch 16 --world 4 --workdir /work/exp/s27/shapes3/$s > /work/exp/s27/part3_$s.log 2>&1
  echo "== part 3 $s end $(date -u +%H:%M:%S) rc $?"
done
