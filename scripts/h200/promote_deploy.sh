#!/bin/bash
# DEVICE, after scripts/h200/tuner_run.sh's study ended: serve its promoted config on the GPUs through
# servetune's own promotion CLI. `ray start --head` (dashboard REST on 127.0.0.1:8265), then
# `python -m tuner.promote --study-run <the study's MLflow parent run> --deploy` (Ray Serve vLLM app,
# blue/green, a streaming chat completion through the Serve proxy before staging moves), then the same
# with --rollback. Writes /tmp/st-out/NAME/deploy.log and deploy.json (served_on_gpu: whether the deploy
# CLI reported success), and stops Ray.
# usage: bash scripts/h200/promote_deploy.sh NAME [TIMEOUT_S]
set -u
NAME=$1; TMO=${2:-420}
SITE=${SITE:-/tmp/servetune-site}
D=/tmp/st-out/$NAME; URI=sqlite:///$D/mlflow.db; LOG=$D/deploy.log
cd /tmp/st
export PYTHONPATH=/tmp/st:$SITE RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s.%N)
python3 -m ray.scripts.scripts start --head --dashboard-host 127.0.0.1 --disable-usage-stats > "$LOG" 2>&1
RUN=$(python3 -c "
import mlflow, sys
c = mlflow.MlflowClient('$URI')
e = c.get_experiment_by_name('$NAME')
runs = c.search_runs([e.experiment_id], \"tags.servetune.kind = 'study'\", order_by=['attributes.start_time DESC'])
print(runs[0].info.run_id)")
echo "study run: $RUN" | tee -a "$LOG"
timeout "$TMO" python3 -m tuner.promote --study-run "$RUN" --mlflow-uri "$URI" --deploy --output "$D/promote" \
  --timeout $(( TMO - 30 )) 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
t1=$(date +%s.%N)
served=false; grep -q "^deployed:" "$LOG" && [ "$rc" = 0 ] && served=true
rb=null
if [ "$served" = true ]; then
  timeout 180 python3 -m tuner.promote --rollback "$NAME-config" --mlflow-uri "$URI" 2>&1 | tee -a "$LOG"
  rb=${PIPESTATUS[0]}
fi
echo "{\"served_on_gpu\": $served, \"deploy_exit_code\": $rc, \"rollback_exit_code\": $rb, \"start_epoch\": $t0, \"end_epoch\": $t1}" > "$D/deploy.json"
cat "$D/deploy.json"
python3 -m ray.scripts.scripts stop --force >> "$LOG" 2>&1
