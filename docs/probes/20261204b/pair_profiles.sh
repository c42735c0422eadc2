#!/bin/bash
# paired: old order (d251e49 worktree) vs new order (main), alternating, on seed 20261220 w5
cd /work/exp/pair
for i in a b; do
  for v in new old; do
    d=/work/exp/pair/${v}_$i; mkdir -p $d
    if [ $v = old ]; then src=/tmp/old; else src=/work/main; fi
    s=$(date +%s)
    (cd $src && PYTHONPATH=$src python -m autoplan.cli profile model --model /work/exp/f20/w5/shape.json --mbs 1,2,4 --nproc 3 --out $d/model.json > $d/prof.log 2>&1) || python -c "print('fail')"
    echo "$v $i $(( $(date +%s)-s )) s"
  done
done
