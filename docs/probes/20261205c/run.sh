#!/bin/bash
# Re-profile the five workloads the model's choice missed at bfc7f83/1f852ea (K=3) and two it hit (K=2).
cd "$(dirname "$0")"
for spec in s10/d20261237/w0:3 s10/d20261237/w4:3 s10/d20261238/w3:3 s10/d20261238/w5:3 s11/d20261239/w5:3 \
            s10/d20261238/w0:2 s10/d20261237/w1:2; do
  dir=${spec%%:*}; k=${spec##*:}
  echo "== $dir ($(date -u +%T))"
  python reprofile.py /work/exp/$dir $k /tmp/rp/${dir//\//_} 2>&1
done
echo "done $(date -u +%T)"
