#!/usr/bin/env bash
# The one command a GPU session runs (issue 30): `bash benchmarks/gpu_session.sh [all|bench|msmarco|ray]`, with the
# packed model carried (carry [".gpu"]; made here by `python benchmarks/gpu_pack_model.py --wheels`).
#
#   all      (default) bench_gpu.py's default run, then the MS MARCO-sized run in the time left (fewer passages, said
#            so, when 8.8M would not fit)
#   bench    bench_gpu.py only            msmarco   the MS MARCO-sized run only (a second command: all its time)
#   ray      the MS MARCO-sized run, then the same through Ray on one local node, results compared
#
# No pip, no internet: the model is unpacked from .gpu/minilm, pydantic (gapbench's dense settings) unzipped from
# .gpu/wheels only when the machine lacks it. Results go to $OUT (bench_gpu.txt, bench_gpu_msmarco.txt, session.log).
# GPU_SESSION_BUDGET_S: the seconds this command may take (default 570, the device's 600 less a margin); each step
# runs under `timeout` within it. GPU_SESSION_SMALL=1: toy sizes on the CPU, the dry run of this script.
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
MODE=${1:-all}
BUDGET=${GPU_SESSION_BUDGET_S:-570}
OUT=${OUT:-$PWD/runs/gpu-session}
PY=${PYTHON:-$(command -v python3 || command -v python)}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-session.XXXXXX")
mkdir -p "$OUT"
exec > >(tee -a "$OUT/session.log") 2>&1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 PYTHONUNBUFFERED=1

case "$MODE" in all|bench|msmarco|ray) ;; *) echo "gpu_session: unknown mode '$MODE' (all, bench, msmarco or ray)"; exit 2;; esac
small=()
msmarco=(--msmarco)
if [ -n "${GPU_SESSION_SMALL:-}" ]; then
  small=(--small)
  msmarco=(--msmarco "${GPU_SESSION_SMALL_MSMARCO:-150}")
fi

left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "[gpu_session +$(( $(date +%s) - START ))s, $(left)s left] $*"; }

log "mode $MODE; python $PY ($("$PY" --version 2>&1)); results in $OUT"
if ! timeout 120 "$PY" benchmarks/gpu_pack_model.py --unpack --to "$WORK/minilm"; then
  log "the model did not unpack: was .gpu carried (carry [\".gpu\"]) and packed with gpu_pack_model.py?"
  exit 2
fi
SITE=$(timeout 60 "$PY" benchmarks/gpu_pack_model.py --site "$WORK/site") || { log "the carried wheels failed"; exit 2; }
if [ -n "$SITE" ]; then export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"; fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
else
  log "no nvidia-smi here"
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

rc=0
if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  limit=$(( $(left) - 20 ))
  [ "$MODE" = all ] && [ "$limit" -gt 330 ] && limit=330  # leave the MS MARCO run the rest
  log "bench_gpu.py (at most ${limit}s)"
  timeout "$limit" "$PY" benchmarks/bench_gpu.py --model "$WORK/minilm" "${small[@]}" --out "$OUT/bench_gpu.txt"
  status=$?
  [ $status -eq 124 ] && log "bench_gpu.py ran out of its ${limit}s: the lines written so far are in $OUT/bench_gpu.txt"
  [ $status -ne 0 ] && rc=$status
fi
if [ "$MODE" != bench ]; then
  limit=$(( $(left) - 10 ))
  if [ "$limit" -lt 90 ]; then
    log "no time left for the MS MARCO-sized run (${limit}s): run 'bash benchmarks/gpu_session.sh msmarco' next"
  else
    extra=()
    [ "$MODE" = ray ] && extra=(--ray --work "$WORK/caches")
    log "MS MARCO-sized run (at most ${limit}s)"
    timeout "$limit" "$PY" benchmarks/bench_gpu.py --model "$WORK/minilm" "${small[@]}" "${msmarco[@]}" "${extra[@]}" \
      --budget-s $(( limit - 30 )) --out "$OUT/bench_gpu_msmarco.txt"
    status=$?
    [ $status -eq 124 ] && log "the MS MARCO-sized run ran out of its ${limit}s"
    [ $status -ne 0 ] && rc=$status
  fi
fi
rm -rf "$WORK"
log "done (exit $rc)"
exit $rc
