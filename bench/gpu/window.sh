#!/usr/bin/env bash
# One device call of at most about 8 minutes, prepared for a short GPU window (15 minutes of
# device time a session, start-up included): the fidelity truth's waiting training units, then the
# campaign parts that need nothing beyond the device image's packages. Run it from the repository
# root on the device machine, carrying data/fashion-mnist (docs/gpu.md, "A short window"):
#
#     bash bench/gpu/window.sh                     # $OUT: truth_units.tar, window.log, <part>.json
#
# Knobs (environment): DEVICE (cuda), TRUTH_MIN (3: minutes in which truth units are taken;
# 0 skips), TRUTH_WORKERS (4), PARTS ("latency roofline fit predictors"), PART_BUDGET (45 s per
# part), SMOKE (1: the campaign's tiny settings, for the CPU dry run), PYTHON (python3), KIT
# (.gpu: a folder holding an aihwkit wheel built for the image and openblas.tar.xz, see
# docs/gpu.md; with it the truth also scores and runs HWA), PHASES (the truth's phases: train,
# or train,score,hwa,score_hwa where the kit is there).
set -euo pipefail
: "${OUT:?set OUT to the folder whose files come back (the device machine sets it)}"
DEVICE=${DEVICE:-cuda}
TRUTH_MIN=${TRUTH_MIN:-3}
TRUTH_WORKERS=${TRUTH_WORKERS:-4}
PARTS=${PARTS-latency roofline fit predictors}  # set but empty: no parts
PART_BUDGET=${PART_BUDGET:-45}
PY=${PYTHON:-python3}  # the device image's Python; the dry run passes the project's
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LOG=$OUT/window.log
mkdir -p "$OUT"

# The truth reads Fashion-MNIST from its installed place; the device image has none.
if [ -d data/fashion-mnist ] && [ ! -d /usr/share/datasets/fashion-mnist ] && [ -w /usr/share ]; then
  mkdir -p /usr/share/datasets && cp -r data/fashion-mnist /usr/share/datasets/
fi
{ date -u; "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>/dev/null || true
} >> "$LOG" 2>&1

# aihwkit, which the image lacks, from the carried kit: the truth's scoring and HWA units need
# it (its fast path runs on the GPU; the compiled tiles only need to load, with their OpenBLAS).
KIT=${KIT:-.gpu}
if compgen -G "$KIT/aihwkit-*.whl" > /dev/null; then  # with aihwkit-lightning's, HWA's engine
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/kit "$KIT"/*.whl >> "$LOG" 2>&1
  mkdir -p /tmp/kit-lib && tar -xJf "$KIT/openblas.tar.xz" -C /tmp/kit-lib
  export PYTHONPATH=/tmp/kit:$PYTHONPATH LD_LIBRARY_PATH=/tmp/kit-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  PHASES=${PHASES:-train,score,hwa,score_hwa}
  "$PY" -c "import aihwkit, aihwkit_lightning; print('aihwkit', aihwkit.__version__)" >> "$LOG" 2>&1
fi
PHASES=${PHASES:-train}

status=0
# 1. Truth: the units of PHASES, fp32 with TF32 off; records and weights come back as one
#    archive, unpacked at the repository root here.
if [ "$TRUTH_MIN" != 0 ]; then
  hours=$("$PY" -c "print($TRUTH_MIN / 60)")
  "$PY" -m bench.fidelity truth --list --device "$DEVICE" --phases "$PHASES" >> "$LOG" 2>&1 || true
  # INT, not TERM: the truth packs what it finished before it exits (KILL 60 s later)
  timeout -s INT -k 60 $(( TRUTH_MIN * 60 + 120 )) "$PY" -m bench.fidelity truth --device "$DEVICE" \
      --phases "$PHASES" --workers "$TRUTH_WORKERS" --threads 2 --hours "$hours" \
      --pack "$OUT/truth_units.tar" >> "$LOG" 2>&1 || status=$?
fi

# 2. Campaign parts, each within its budget; a failed part is recorded in its file. PARTS=""
#    leaves the window to the truth.
[ -z "$PARTS" ] && { date -u >> "$LOG"; exit $status; }
args=(--device "$DEVICE" --out "$OUT" --budget "$PART_BUDGET")
[ -d data/fashion-mnist ] && args+=(--data-root data/fashion-mnist)
[ -n "${SMOKE:-}" ] && args+=(--smoke)
for part in $PARTS; do args+=(--part "$part"); done
timeout $(( $(wc -w <<< "$PARTS") * (PART_BUDGET + 40) )) "$PY" -m bench.gpu.campaign \
    "${args[@]}" >> "$LOG" 2>&1 || status=$?
date -u >> "$LOG"
exit $status  # non-zero when the truth run or any part failed; what finished is in $OUT
