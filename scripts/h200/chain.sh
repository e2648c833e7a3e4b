#!/bin/bash
# DEVICE, one command of a chain (call it again with the same NAME until it says "deploy ended"): wait
# for the detached study NAME (scripts/h200/tuner_run.sh) to end, then start its promotion on the GPU
# once (scripts/h200/promote_deploy.sh: baseline as staging, the winner with its canary, --rollback),
# wait for it, and pack the study folder (deploy.log, deploy.json, promote*/, replica_logs/ inside) into
# $OUT, split in 15 MB pieces (at most 16 MiB a file comes back). Carried SGLang pack parts
# (.gpu/sgl/c/part_*) are stashed on the way (.gpu/sgl/dev.sh setup).
# usage: bash scripts/h200/chain.sh NAME SECONDS [DEPLOY_TIMEOUT_S]
set -u
NAME=$1; END=$(( $(date +%s) + $2 )); TMO=${3:-900}
D=/tmp/st-out/$NAME
ls .gpu/sgl/c/part_* >/dev/null 2>&1 && bash .gpu/sgl/dev.sh setup | tail -2
wait_for() {  # FILE: until it exists or the deadline
  while [ ! -f "$1" ] && [ "$(date +%s)" -lt "$END" ]; do sleep 5; done
  [ -f "$1" ]
}
if wait_for /tmp/st-out/$NAME.timing.json; then
  echo "study ended: $(cat /tmp/st-out/$NAME.timing.json)"
  grep -E "^\[servetune\] trial .* (ok|failed|error)|study .*trials in|baseline|best SLA|promotion:" /tmp/st-out/$NAME.log | cut -c1-260 | tail -12
  if [ ! -f $D/.deploy_started ] && [ -f $D/state.json ]; then
    touch $D/.deploy_started; bash scripts/h200/promote_deploy.sh "$NAME" "$TMO"
  fi
  if wait_for $D/deploy.json; then echo "deploy ended: $(cat $D/deploy.json)"; else echo "deploy still running"; fi
  grep -E "^== |^(ok|failed|deployed|canary|promoted|study run|  )" $D/deploy.log 2>/dev/null | cut -c1-300 | tail -30
else
  echo "study still running"; tail -5 /tmp/st-out/$NAME.log | cut -c1-240
fi
O=${OUT:-/tmp/out}; mkdir -p "$O"
cp /tmp/st-out/$NAME.log /tmp/st-out/$NAME.timing.json "$O/" 2>/dev/null
[ -d $D ] && tar -czf - -C /tmp/st-out "$NAME" | split -b 15000000 -d - "$O/$NAME.tgz."
ls -la "$O"; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
