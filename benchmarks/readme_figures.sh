#!/usr/bin/env bash
# Re-measure the README's figures: every row of its "Measured figures" table and every picture in
# docs/img, one command per figure, each logged with the date and the commit it ran at.
#
#   bash benchmarks/readme_figures.sh --list                  # the figures' names
#   bash benchmarks/readme_figures.sh --dry-run               # print each figure's command, run nothing
#   bash benchmarks/readme_figures.sh --only fidelity,soak    # re-measure these figures
#   bash benchmarks/readme_figures.sh                         # re-measure all of them (hours on 2 cores;
#                                                             # emulated_nodes needs root: network namespaces)
#
# Output ($OUT, else ./readme-figures-out): NAME.log (the command's output) per figure, and
# figures.md: one row per figure with its command, date (UTC), commit, exit code and wall time,
# to copy into the README's table beside the figure. Commands run in $OUT/work (profiles, plans);
# pictures are written into the repository's docs/img. AUTOPLAN (default: autoplan) and PYTHON
# (default: python) name the programs. A failing figure is reported and the others still run;
# the exit code is 1 when any failed, 2 on bad usage.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AP=${AUTOPLAN:-autoplan}
PY=${PYTHON:-python}
WALK="$AP profile model --model gpt-small --out model.json --mbs 1,2,4 --nproc 4 && \
$AP profile cluster --nproc 4 --memory-per-device 48MiB --out cluster.json"

NAMES=(demo demo_repeat solve_scaling fidelity fidelity_holdout published_runs executor_overhead pipeline_memory one_device
       emulated_nodes emulated_nodes_lossy fuzzed_inputs elastic soak plan_gpt3_175b plan_cpu_1f1b validate_cpu)
declare -A CMD=(
  [demo]="$AP demo --workdir demo"
  [demo_repeat]="bash $REPO/benchmarks/demo_repeat.sh 10 demo-repeat"
  [solve_scaling]="$PY $REPO/benchmarks/solve_scaling.py --no-compare"
  [fidelity]="$PY $REPO/benchmarks/fidelity.py"
  [fidelity_holdout]="$PY $REPO/benchmarks/fidelity.py --set holdout"
  [published_runs]="$PY $REPO/benchmarks/published_runs.py"
  [executor_overhead]="$PY $REPO/benchmarks/executor_overhead.py"
  [pipeline_memory]="$PY $REPO/benchmarks/pipeline_memory.py"
  [one_device]="$AP profile model --model gpt-small --precision bf16 --mbs 1,2,4 --out model-bf16.json && \
$AP profile cluster --nproc 1 --memory-per-device 192MiB --out one.json && \
$AP solve --model model-bf16.json --cluster one.json --global-batch 8 --out plan-one.json && \
$AP validate --model model-bf16.json --cluster one.json --global-batch 8 --top-k 3"
  [emulated_nodes]="$PY $REPO/benchmarks/emulated_cluster.py --compare"
  [emulated_nodes_lossy]="$PY $REPO/benchmarks/emulated_cluster.py --compare --allow-lossy fp16,powersgd,localsgd"
  [fuzzed_inputs]="$PY -m pytest $REPO/tests/test_fuzz_inputs.py --hypothesis-show-statistics"
  [elastic]="$PY -m pytest $REPO/tests/test_elastic.py"
  [soak]="$PY -m pytest $REPO/tests/test_soak.py"
  [plan_gpt3_175b]="$AP solve --model gpt3-175b --cluster dgx-a100-80gb:128 --global-batch 1536 \
--layout tp=8,pp=8,schedule=interleaved --out plan-175b.json && \
$AP show plan-175b.json --out $REPO/docs/img/plan-gpt3-175b.png"
  [plan_cpu_1f1b]="$WALK && \
$AP solve --model model.json --cluster cluster.json --global-batch 16 --optimizer sgd \
--layout pp=4,schedule=1f1b --out plan-1f1b.json && \
$AP show plan-1f1b.json --out $REPO/docs/img/plan-cpu-1f1b.png"
  [validate_cpu]="$WALK && \
$AP validate --model model.json --cluster cluster.json --global-batch 16 --top-k 4 \
--memory-per-device 64MiB --plot $REPO/docs/img/validate-cpu.png"
)

usage() { echo "usage: $0 [--list] [--dry-run] [--only NAME[,NAME...]]" >&2; exit 2; }
dry=0; only=""
while [ $# -gt 0 ]; do
  case $1 in
    --list) printf '%s\n' "${NAMES[@]}"; exit 0 ;;
    --dry-run) dry=1 ;;
    --only) [ $# -ge 2 ] || usage; only=$2; shift ;;
    *) usage ;;
  esac
  shift
done
chosen=("${NAMES[@]}")
if [ -n "$only" ]; then
  IFS=, read -ra chosen <<< "$only"
  for n in "${chosen[@]}"; do
    [ -n "${CMD[$n]+x}" ] || { echo "error: no README figure named '$n' (--list names them)" >&2; exit 2; }
  done
fi

if [ $dry = 1 ]; then
  for n in "${chosen[@]}"; do printf '%s: %s\n' "$n" "${CMD[$n]}"; done
  exit 0
fi

OUT=${OUT:-$PWD/readme-figures-out}
mkdir -p "$OUT/work"
commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit (with uncommitted changes)"
table="$OUT/figures.md"
[ -f "$table" ] || printf '| figure | command | date (UTC) | commit | exit | wall |\n|---|---|---|---|---|---|\n' > "$table"
failed=0
for n in "${chosen[@]}"; do
  day=$(date -u +%Y-%m-%d); t0=$(date +%s)
  echo "== $n: ${CMD[$n]}"
  (cd "$OUT/work" && bash -c "${CMD[$n]}") > "$OUT/$n.log" 2>&1
  rc=$?; wall=$(( $(date +%s) - t0 ))
  [ $rc = 0 ] || { failed=1; echo "   FAILED (exit $rc): see $OUT/$n.log"; }
  printf '| %s | `%s` | %s | %s | %s | %d s |\n' "$n" "${CMD[$n]//$REPO\//}" "$day" "$commit" "$rc" "$wall" >> "$table"
done
echo "figures: $table"
exit $failed
