#!/usr/bin/env bash
# `autoplan demo` N times in a row on a busy machine (issue 24): a busy loop pinned to one core for the
# whole run, each demo in a fresh working directory (fresh profiles), its exit code and wall time logged.
#
#   bash benchmarks/demo_repeat.sh [N=10] [OUT=./demo-repeat-out]
#
# Prints one line per run (exit code, seconds, the chosen layout) and, at the end, how many exited 0;
# exits 1 if any run did not. Each run's whole output is in OUT/runK/out.txt. AUTOPLAN names the program.
set -uo pipefail
N=${1:-10}
OUT=${2:-demo-repeat-out}
AP=${AUTOPLAN:-autoplan}
if ! [[ "$N" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: N must be a positive whole number, got '$N'" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2
taskset -c 0 python3 -c "while True: pass" &
BUSY=$!
trap 'kill $BUSY 2>/dev/null' EXIT
echo "start $(date -u +%FT%TZ), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null), busy loop on core 0"
ok=0
for i in $(seq 1 "$N"); do
  rm -rf "$OUT/run$i" && mkdir -p "$OUT/run$i"
  t0=$(date +%s)
  (cd "$OUT/run$i" && $AP demo --workdir wd > out.txt 2>&1)
  rc=$?
  [ $rc -eq 0 ] && ok=$((ok + 1))
  echo "run $i: exit $rc, $(( $(date +%s) - t0 )) s, $(grep -m1 'chosen:' "$OUT/run$i/out.txt" | sed 's/  */ /g')"
done
echo "end $(date -u +%FT%TZ): $ok of $N exited 0"
[ $ok -eq "$N" ]
