#!/usr/bin/env bash
# The GPU check of issue 10, one prepared script: at most about 8 minutes on one H200, nothing
# fetched from the network.
#
#   bash benchmarks/gpu_check.sh                                  # on the GPU machine, results in $OUT
#   GPU_CHECK_MODEL=gpt-tiny DEVICE=cpu bash benchmarks/gpu_check.sh   # the same stages on CPU (dry run)
#
# Stages (each under its own timeout and the overall deadline; a failed stage is reported and the
# others still run and are reported):
#   env              versions, the GPU, whether pulp imports
#   profile_model    autoplan profile model --precision bf16 at TP shard degrees 1,2,4,8
#   profile_cluster  autoplan profile cluster --nproc 1: the one-device cluster, 30 GiB budget
#   solve            autoplan solve on that cluster
#   validate         validate the top 4 layouts (autoplan validate's calls, one layout at a time):
#                    predicted vs measured step time and torch.cuda.max_memory_allocated
#   run              autoplan run PLAN -- examples/train_gpt.py --steps 5
#   fp8              a block of three models (1.3B, 6.7B, Llama 3 8B) in bf16 and in fp8 (torchao), eager and
#                    under torch.compile, measured against the analytic speed-up
#   report           benchmarks/gpu_check.py report: measured vs the analytic catalogue profile
#                    layer by layer (time, saved bytes, TFLOP/s), the runs, issue 10's checks
#
# Output ($OUT, else ./gpu-check-out): gpu_check.json, gpu_check.md, gpu_check.log, and the
# artifacts model.json, cluster.json, plan.json, validate.json.
#
# pulp is not installed on the GPU machine: carry it as a wheel in .whl/ at the repository root
# (see the device README); the script installs any .whl/*.whl into a temporary folder, offline.
#
# Settings (environment): GPU_CHECK_MODEL (gpt3-1.3b), DEVICE (cuda), PRECISION (bf16),
# GPU_CHECK_TP (1,2,4,8), GPU_CHECK_MBS (1,2,4,8), GPU_CHECK_BATCH (8 sequences),
# GPU_CHECK_BUDGET (30GiB), GPU_CHECK_TOPK (4), GPU_CHECK_STEPS (3 timed validate steps),
# GPU_CHECK_RUN_STEPS (5), GPU_CHECK_REPEATS (5, per profiled figure),
# GPU_CHECK_DEADLINE_S (460: stages get what is left of it), GPU_CHECK_FP8_MODELS (model:mbs,...; default
# gpu_check.py's FP8_SHAPES: gpt3-1.3b:4,gpt3-6.7b:2,llama3-8b:1), GPU_CHECK_CATALOGUE
# (dgx-h200-141gb:1), GPU_CHECK_WHEELS (.whl), PYTHON (python3).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL=${GPU_CHECK_MODEL:-gpt3-1.3b}
DEVICE=${DEVICE:-cuda}
PRECISION=${PRECISION:-bf16}
TP=${GPU_CHECK_TP:-1,2,4,8}
MBS=${GPU_CHECK_MBS:-1,2,4,8}
BATCH=${GPU_CHECK_BATCH:-8}
BUDGET=${GPU_CHECK_BUDGET:-30GiB}
TOPK=${GPU_CHECK_TOPK:-4}
STEPS=${GPU_CHECK_STEPS:-3}
RUN_STEPS=${GPU_CHECK_RUN_STEPS:-5}
REPEATS=${GPU_CHECK_REPEATS:-5}
DEADLINE_S=${GPU_CHECK_DEADLINE_S:-460}
FP8_MODELS=${GPU_CHECK_FP8_MODELS:-}        # empty: gpu_check.py fp8's own (FP8_SHAPES)
CATALOGUE=${GPU_CHECK_CATALOGUE:-dgx-h200-141gb:1}
WHEELS=${GPU_CHECK_WHEELS:-$REPO/.whl}
PY=${PYTHON:-python3}
OUT_DIR=${OUT:-$PWD/gpu-check-out}

START=$(date +%s)
REPORT_RESERVE_S=20          # kept back from the deadline for the report
RUN_RESERVE_S=200            # kept back from validate for autoplan run (60 s) and the fp8 stage
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
mkdir -p "$OUT_DIR"
LOG=$OUT_DIR/gpu_check.log
: >"$LOG"
STATUS=$WORK/status.tsv
: >"$STATUS"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"    # autoplan from this checkout, nothing installed
export PYTHONUNBUFFERED=1
AUTOPLAN=("$PY" -m autoplan.cli)

say() { echo "[gpu_check $(($(date +%s) - START))s] $*" | tee -a "$LOG"; }

# stage NAME LIMIT_S COMMAND...: run COMMAND with stdout to WORK/NAME.out, stderr to WORK/NAME.err,
# under min(LIMIT_S, what is left before the deadline); record "name rc wall_s last-error-line".
stage() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE_S - REPORT_RESERVE_S - ($(date +%s) - START)))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    say "$name: skipped (deadline)"
    printf '%s\tskipped\t0\tno time left before the %ss deadline\n' "$name" "$DEADLINE_S" >>"$STATUS"
    return 0
  fi
  say "$name: start (limit ${limit}s)"
  local t0 rc=0
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  local wall
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local why=""
  if ((rc == 124 || rc == 137)); then
    why="timed out after ${limit}s"
  elif ((rc != 0)); then
    why=$(grep -E '^(error:|[A-Za-z]*Error)' "$WORK/$name.err" | tail -n 1 | tr '\t' ' ' || true)
    [[ -z $why ]] && why=$(tail -n 1 "$WORK/$name.err" | tr '\t' ' ')
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$wall" "$why" >>"$STATUS"
  { echo "----- $name: exit $rc, ${wall}s -----"; cat "$WORK/$name.out"; cat "$WORK/$name.err"; } >>"$LOG"
  say "$name: exit $rc in ${wall}s${why:+: $why}"
  return 0
}

# pulp: offline, from carried wheels, when this python lacks it
if ! "$PY" -c "import pulp" 2>/dev/null; then
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    say "installing $(ls "$WHEELS"/*.whl | xargs -n1 basename | tr '\n' ' ')into $WORK/site (offline)"
    if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" \
      "$WHEELS"/*.whl >>"$LOG" 2>&1; then
      export PYTHONPATH="$PYTHONPATH:$WORK/site"
    else
      say "installing the carried wheels failed (see the log); solve, validate and run will fail"
    fi
  else
    say "pulp is missing and no wheels in $WHEELS: solve, validate and run will fail"
  fi
fi

cat >"$WORK/settings.json" <<EOF
{"model": "$MODEL", "device": "$DEVICE", "precision": "$PRECISION", "tp": "$TP", "mbs": "$MBS",
 "global_batch": $BATCH, "memory_per_device": "$BUDGET", "top_k": $TOPK, "validate_steps": $STEPS,
 "run_steps": $RUN_STEPS, "deadline_s": $DEADLINE_S, "catalogue": "$CATALOGUE"}
EOF

stage env 60 "$PY" "$REPO/benchmarks/gpu_check.py" env --device "$DEVICE" --out "$WORK/env.json"
stage profile_model 120 "${AUTOPLAN[@]}" profile model --model "$MODEL" --device "$DEVICE" \
  --precision "$PRECISION" --tp "$TP" --mbs "$MBS" --repeats "$REPEATS" --out "$WORK/model.json"
stage profile_cluster 60 "${AUTOPLAN[@]}" profile cluster --nproc 1 --device "$DEVICE" \
  --memory-per-device "$BUDGET" --out "$WORK/cluster.json"
stage solve 60 "${AUTOPLAN[@]}" solve --model "$WORK/model.json" --cluster "$WORK/cluster.json" \
  --global-batch "$BATCH" --out "$WORK/plan.json"
# autoplan validate's own calls, one layout at a time: the JSON is rewritten after each run, so a
# layout that runs out of time costs its own figure only
VALIDATE_S=$((DEADLINE_S - REPORT_RESERVE_S - RUN_RESERVE_S - ($(date +%s) - START)))
stage validate "$VALIDATE_S" "$PY" "$REPO/benchmarks/gpu_check.py" validate --model "$WORK/model.json" \
  --cluster "$WORK/cluster.json" --global-batch "$BATCH" --top-k "$TOPK" --steps "$STEPS" --warmup 1 \
  --time-left-s "$((VALIDATE_S - 5))" --out "$WORK/validate.json"
stage run 90 "${AUTOPLAN[@]}" run "$WORK/plan.json" -- "$REPO/examples/train_gpt.py" --steps "$RUN_STEPS"
# issue 19: a block of each of FP8_MODELS in bf16 and fp8 (torchao float8 linears), eager and compiled,
# measured beside the analytic speed-up;
# on a device without fp8 tensor cores (or without torchao) it records the refusal
FP8_LEFT_S=$((DEADLINE_S - REPORT_RESERVE_S - ($(date +%s) - START)))
stage fp8 150 "$PY" "$REPO/benchmarks/gpu_check.py" fp8 ${FP8_MODELS:+--models "$FP8_MODELS"} --device "$DEVICE" \
  --time-left-s "$((FP8_LEFT_S < 150 ? FP8_LEFT_S - 5 : 145))" --out "$WORK/fp8.json"

say "report"
"$PY" "$REPO/benchmarks/gpu_check.py" report --work "$WORK" --out "$OUT_DIR" --catalogue "$CATALOGUE" \
  2>>"$LOG" | tee -a "$LOG" || say "report failed (see the log)"
for f in model.json cluster.json plan.json validate.json fp8.json; do
  if [[ -f $WORK/$f ]]; then cp "$WORK/$f" "$OUT_DIR/$f"; fi
done
say "done in $(($(date +%s) - START))s; results in $OUT_DIR"
