#!/bin/bash
# DEVICE, after scripts/h200/tuner_run.sh's joint study NAME ended (/tmp/st-out/NAME: state.json, mlflow.db):
# the failover router on ONE GPU, primary = trial PRIMARY (best vLLM), secondary = trial SECONDARY (best SGLang).
#   1. python -m tuner.promote --study-run RUN --trial ID --no-alias --output DIR, once per trial: registers the
#      trial as a version of <study>-config (staging stays where it was) and writes DIR/promoted.yaml; without --deploy
#      nothing is deployed and no engine starts (a picked trial is never re-run to confirm it)
#   2. ray start --head (scripts/h200/ray_env.sh, as promote_deploy.sh)
#   3. python -m tuner.promote.failover --share-gpu --exclusive --kill-primary: half a GPU and SHARE of its
#      memory per side, the secondary started once the primary runs, the primary's engine killed, traffic
#      must move to the secondary
# The checkout's code replaces the study snapshot's in /tmp/st first (its .gpu/model stays); that copy runs,
# detached (own session: a device command lasts at most 10 minutes; two engine starts take minutes each)
# unless FOREGROUND=1. Output in /tmp/st-out/NAME: failover.log, failover.json (exit codes, who answered
# before and after the kill, the CLI's report), failover-gpu.csv (per-process GPU memory every 10 s),
# failover-{primary,secondary}/promoted.yaml, replica_logs/. Stops its Ray at the end.
# usage: bash scripts/h200/failover_demo.sh NAME PRIMARY_TRIAL SECONDARY_TRIAL [TIMEOUT_S]   env: SHARE (0.42) REQUESTS (3)
set -u
NAME=$1; PRIMARY=$2; SECONDARY=$3; TMO=${4:-2400}
D=/tmp/st-out/$NAME; LOG=$D/failover.log
[ -f "$D/state.json" ] || { echo "error: $D/state.json missing: run scripts/h200/tuner_run.sh for $NAME first" >&2; exit 2; }
if [ "${FOREGROUND:-0}" != 1 ]; then
  cd "$(dirname "$0")/../.." || exit 2  # the checkout
  [ -d /tmp/st/.gpu/model ] || { echo "error: /tmp/st/.gpu/model missing (the study's snapshot, tuner_run.sh)" >&2; exit 2; }
  tar --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C /tmp/st
  FOREGROUND=1 setsid bash /tmp/st/scripts/h200/failover_demo.sh "$@" < /dev/null > /dev/null 2>&1 &
  echo "started failover_demo for $NAME (pid $!) at $(date +%T); follow: tail -f $LOG; result: $D/failover.json"
  exit 0
fi
. "$(dirname "$0")/ray_env.sh"
URI=$(state_field "$D/state.json" tracking_uri)
RUN=$(state_field "$D/state.json" parent_run_id)
rm -f "$D/failover-result.json"
echo "== $(date -u +%T) study run $RUN, store $URI; primary trial $PRIMARY, secondary trial $SECONDARY" > "$LOG"
promote() {  # promote SIDE TRIAL: write /tmp/st-out/NAME/failover-SIDE/promoted.yaml; exit code in $rc
  echo "== $(date -u +%T) promote $1: python -m tuner.promote --study-run $RUN --trial $2 --no-alias" >> "$LOG"
  timeout 600 python3 -m tuner.promote --mlflow-uri "$URI" --study-run "$RUN" --trial "$2" --no-alias --output "$D/failover-$1" \
    >> "$LOG" 2>&1
  rc=$?
  [ "$rc" = 0 ] && [ ! -f "$D/failover-$1/promoted.yaml" ] && { echo "no $D/failover-$1/promoted.yaml" >> "$LOG"; rc=3; }
  echo "== $(date -u +%T) promote $1 exit $rc" >> "$LOG"
}
promote primary "$PRIMARY"; rp=$rc
promote secondary "$SECONDARY"; rs=$rc
fo=null
if [ "$rp" = 0 ] && [ "$rs" = 0 ]; then
  ray_head_start >> "$LOG" 2>&1
  nvidia-smi --query-compute-apps=timestamp,pid,process_name,used_memory --format=csv -l 10 > "$D/failover-gpu.csv" 2>&1 &
  smi=$!
  echo "== $(date -u +%T) failover" >> "$LOG"
  timeout "$TMO" python3 -m tuner.promote.failover --primary "$D/failover-primary/promoted.yaml" \
    --secondary "$D/failover-secondary/promoted.yaml" --share-gpu "${SHARE:-0.42}" --exclusive --kill-primary \
    --requests "${REQUESTS:-3}" --timeout 900 --report "$D/failover-result.json" >> "$LOG" 2>&1
  fo=$?; echo "== $(date -u +%T) failover exit $fo" >> "$LOG"
  kill "$smi" 2>/dev/null
  keep_replica_logs "$D/replica_logs"
  ray_head_stop >> "$LOG" 2>&1
fi
python3 - "$D" "$fo" "$rp" "$rs" <<'PY'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
report = d / "failover-result.json"
result = json.loads(report.read_text()) if report.exists() else None
out = {"exit_code": json.loads(sys.argv[2]), "promote_exit_codes": {"primary": int(sys.argv[3]), "secondary": int(sys.argv[4])},
       "before": (result or {}).get("before"), "after": (result or {}).get("after"), "result": result}
(d / "failover.json").write_text(json.dumps(out, indent=2))
PY
