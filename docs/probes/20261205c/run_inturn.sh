#!/bin/bash
# The same workloads profiled three times each with the pipeline runs timed in turn (the change under test).
cd "$(dirname "$0")"
for dir in s10/d20261237/w0 s10/d20261237/w4; do
  echo "== $dir ($(date -u +%T))"
  python reprofile.py /work/exp/$dir 3 /tmp/rp2/${dir//\//_} 2>&1
done
echo "done $(date -u +%T)"
