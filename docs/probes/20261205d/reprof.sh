#!/bin/bash
# reprof.sh s12/d20261240/w4 ...: profile each stored workload afresh with the working tree's code, then the three arms
for dir in "$@"; do
  W=/work/exp/$dir; O=/tmp/rp/${dir//\//_}; mkdir -p $O
  world=$(python -c "import json;print(json.load(open('$W/runs.json'))['workload']['world'])")
  gb=$(python -c "import json;print(json.load(open('$W/runs.json'))['workload']['global_batch'])")
  sizes=$(python -c "w,g=$world,$gb;print(','.join(map(str,sorted({1,2,4}|({g//w} if g%w==0 else set())))))")
  t0=$(date +%s)
  if [ ! -f $O/model.json ]; then
    python -m autoplan.cli profile model --model $W/shape.json --out $O/model.json --mbs $sizes --nproc $world > $O/log 2>&1 || { echo "$dir: profile failed"; tail -3 $O/log; continue; }
  fi
  echo "== $dir (world $world, sizes $sizes): profiled in $(( $(date +%s) - t0 )) s"
  python $(dirname $0)/arms.py $W $O/model.json
done
