#!/bin/bash
# DEVICE, after scripts/h200/tuner_run.sh's study NAME ended (its folder /tmp/st-out/NAME holds state.json
# and mlflow.db): serve it on the GPUs through servetune's own promotion CLI, then roll back.
#   1. ray start --head (dashboard REST on 127.0.0.1:8265; Serve HTTP on 127.0.0.1:8000 when first deployed)
#   On a host with one GPU every step runs with --in-place (no room for a side copy of a whole-GPU engine;
#   IN_PLACE=0/1 overrides). The vLLM app runs vLLM's own server in its replica when Ray Serve LLM cannot
#   load the bundle's vLLM (serve_apps.engine_process); the replicas' engine logs are kept in replica_logs/.
#   2. python -m tuner.promote --study-run RUN --trial baseline --deploy   the engine defaults as staging
#      (blue-green: side app + streaming chat smoke test, then staging + smoke test + canary load)
#   3. python -m tuner.promote --study-run RUN --deploy                    the study's winner replaces it:
#      smoke test, then a canary load (tuner.load, the study's workload and SLA, CANARY_FRACTION of the
#      confirmed capacity for CANARY_S seconds); a missed canary puts the defaults back and exits 1
#   4. python -m tuner.promote --rollback NAME-config                      staging back to the defaults
#   5. the failover router demo (FAILOVER=1 and a second study SECONDARY, e.g. the SGLang one): both
#      promoted configs behind serve_apps.failover (--share-gpu on one GPU), the primary's replica killed,
#      traffic moves (two trials of one joint study: scripts/h200/failover_demo.sh)
# Runs detached (its own session: a device command lasts at most 10 minutes; engine starts are minutes
# each), unless FOREGROUND=1. Output: /tmp/st-out/NAME/deploy.log, deploy.json (exit codes, canary
# figures, served_on_gpu). Stops the Ray it started at the end.
# usage: bash scripts/h200/promote_deploy.sh NAME [TIMEOUT_S]
#        env: CANARY_S (60) CANARY_RATE (default: the study's load_fraction x capacity) FAILOVER SECONDARY
set -u
NAME=$1; TMO=${2:-900}
D=/tmp/st-out/$NAME; LOG=$D/deploy.log
[ -f "$D/state.json" ] || { echo "error: $D/state.json missing: run scripts/h200/tuner_run.sh for $NAME first" >&2; exit 2; }
if [ "${FOREGROUND:-0}" != 1 ]; then
  FOREGROUND=1 setsid bash "$0" "$@" < /dev/null > /dev/null 2>&1 &
  echo "started promote_deploy for $NAME (pid $!) at $(date +%T); follow: tail -f $LOG; result: $D/deploy.json"
  exit 0
fi
# shell in /tmp/st, PYTHONPATH, NCCL and Ray env (RAY_AUTH_MODE, RAY_DASHBOARD_ADDRESS), Ray head helpers
. "$(dirname "$0")/ray_env.sh"
URI=$(state_field "$D/state.json" tracking_uri)
RUN=$(state_field "$D/state.json" parent_run_id)
CANARY=(--canary-seconds "${CANARY_S:-60}")
IN_PLACE=${IN_PLACE:-$( [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -le 1 ] && echo 1 || echo 0 )}
PLACE=(); SHARE=(); [ "$IN_PLACE" = 1 ] && PLACE=(--in-place) && SHARE=(--share-gpu)  # one GPU: both sides share it
[ -n "${CANARY_RATE:-}" ] && CANARY+=(--canary-rate "$CANARY_RATE")
t0=$(date +%s.%N)
ray_head_start > "$LOG" 2>&1
echo "study run: $RUN  store: $URI" >> "$LOG"
step() {  # step LABEL ARGS...: one tuner.promote command, its exit code in $rc
  local label=$1; shift
  echo "== $(date -u +%T) $label: python -m tuner.promote $*" >> "$LOG"
  timeout "$TMO" python3 -m tuner.promote --mlflow-uri "$URI" --timeout $(( TMO - 60 )) "${PLACE[@]}" "$@" >> "$LOG" 2>&1
  rc=$?; echo "== $(date -u +%T) $label exit $rc" >> "$LOG"
}
step baseline --study-run "$RUN" --trial baseline --deploy --output "$D/promote-baseline" "${CANARY[@]}"; rb0=$rc
step winner --study-run "$RUN" --deploy --output "$D/promote" "${CANARY[@]}"; rw=$rc
t1=$(date +%s.%N)
rr=null
[ "$rw" = 0 ] && { step rollback --rollback "$NAME-config"; rr=$rc; }
fo=null
if [ "${FAILOVER:-0}" = 1 ] && [ -n "${SECONDARY:-}" ]; then
  S=/tmp/st-out/$SECONDARY
  echo "== $(date -u +%T) failover: primary $D/promoted.yaml, secondary $S/promoted.yaml" >> "$LOG"
  timeout "$TMO" python3 -m tuner.promote.failover --primary "$D/promoted.yaml" --secondary "$S/promoted.yaml" \
    --exclusive --kill-primary --requests 3 --timeout $(( TMO - 60 )) "${SHARE[@]}" >> "$LOG" 2>&1
  fo=$?; echo "== $(date -u +%T) failover exit $fo" >> "$LOG"
fi
served=false; [ "$rw" = 0 ] && served=true  # the winner streamed chat and passed its canary on the GPU
canary=$(python3 -c "
import json, pathlib
p = pathlib.Path('$D/promote/promotion.json')
print(json.dumps(json.loads(p.read_text()).get('canary') if p.exists() else None))")
cat > "$D/deploy.json" <<EOF
{"served_on_gpu": $served, "in_place": $IN_PLACE, "baseline_exit_code": $rb0, "deploy_exit_code": $rw, "rollback_exit_code": $rr,
 "failover_exit_code": $fo, "start_epoch": $t0, "deployed_epoch": $t1, "end_epoch": $(date +%s.%N),
 "canary": $canary}
EOF
keep_replica_logs "$D/replica_logs"
ray_head_stop >> "$LOG" 2>&1
