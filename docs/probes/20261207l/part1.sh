#!/usr/bin/env bash
# Part 1: the two shapes twice on main, the speed monitor beside them (PREREGISTRATION.md).
set -u
cd "$(dirname "$0")/../../.."
P=docs/probes/20261207l
E=/work/exp/s28
python $P/speed_monitor.py --out $E/monitor.jsonl &
MON=$!
for r in r1 r2; do
  for s in 192x6 160x8; do
    PYTHONPATH=. python -u benchmarks/fidelity.py --shape benchmarks/shapes/issue24-$s.json --global-batch 16 --world 4 \
      --workdir $E/$r/$s 2>&1 | python $P/stamp.py > $P/part1_${r}_${s}.log
  done
done
kill $MON
