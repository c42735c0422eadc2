#!/bin/bash
cd /work/main
for r in 1 2; do
  for s in 192x6 160x8; do
    echo "== run $r $s start $(date -u +%H:%M:%S)"
    PYTHONPATH=. python benchmarks/fidelity.py --shape benchmarks/shapes/issue24-$s.json --global-batch 16 --world 4 --workdir /work/exp/s27/shapes$r/$s > /work/exp/s27/part2_run${r}_$s.log 2>&1
    echo "== run $r $s end $(date -u +%H:%M:%S) rc $?"
  done
done
