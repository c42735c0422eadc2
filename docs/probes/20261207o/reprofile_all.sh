#!/bin/bash
cd /work/run
for s in s30/seed20261263 s29/seed20261262; do
  for w in w0 w1 w2 w3 w4 w5; do
    PYTHONPATH=. python -u /work/exp/s31/reprofile.py /work/exp/$s/$w /work/exp/s31/rp/$(basename $s)/$w > /work/exp/s31/rp_$(basename $s)_$w.log 2>&1
    echo "$(date -u +%H:%M:%S) $s $w rc=$?" >> /work/exp/s31/rp_progress.txt
  done
done
