#!/usr/bin/env bash
# Part 2: six jobs of part2_worker.py, 160x8 and 192x6 alternating (PREREGISTRATION.md).
set -u
cd "$(dirname "$0")/../../.."
P=docs/probes/20261207l
for j in 1 2 3; do
  for s in 160x8 192x6; do
    timeout 600 python -m torch.distributed.run --standalone --nproc-per-node 4 $P/part2_worker.py \
      --spec benchmarks/shapes/issue24-$s.json --out $P/part2_${s}_job$j.json > /work/exp/s28/p2/${s}_job$j.log 2>&1
    echo "$(date -u +%H:%M:%S) $s job $j exit $?"
  done
done
