#!/bin/bash
# DEVICE: start `python -m tuner.run --study STUDY` detached from this command (its own process session:
# a device command lasts at most 10 minutes and ends what it leaves running, a new session runs on while
# the host is held). The study itself is the plain front door; only how it is started differs.
# Runs from a snapshot of the checkout in /tmp/st (later commands re-sync the repo and delete the ignored
# files they do not carry, .gpu/model among them), with the bundle installed by .gpu/bundle/install.sh.
# Output: /tmp/st-out/NAME (the study's folder), /tmp/st-out/NAME.log (driver output), NAME.timing.json.
# usage: bash scripts/h200/tuner_run.sh STUDY [tuner.run args...]
set -euo pipefail
STUDY=$1; shift
NAME=$(basename "$STUDY" .yaml)
SITE=${SITE:-/tmp/servetune-site}
[ -f "$SITE/.complete" ] || { echo "error: the bundle is not installed in $SITE; run .gpu/bundle/install.sh" >&2; exit 2; }
rm -rf /tmp/st && mkdir -p /tmp/st /tmp/st-out && rm -f /tmp/st-out/$NAME.timing.json /tmp/st-out/$NAME.log
tar --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C /tmp/st
mkdir -p /tmp/st/.gpu && cp -r .gpu/model /tmp/st/.gpu/model
cd /tmp/st
export PYTHONPATH=/tmp/st:$SITE RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
setsid bash -c '
  t0=$(date +%s.%N)
  python3 -m tuner.run --study "$0" --output /tmp/st-out/'"$NAME"' -v "$@" > /tmp/st-out/'"$NAME"'.log 2>&1
  rc=$?
  t1=$(date +%s.%N)
  p=/tmp/st-out/'"$NAME"'/promoted.yaml
  pm=$( [ -f $p ] && stat -c %Y $p || echo null )
  echo "{\"study\": \"'"$NAME"'\", \"start_epoch\": $t0, \"end_epoch\": $t1, \"exit_code\": $rc, \"promoted_mtime\": $pm, \"gpus\": $(nvidia-smi -L | wc -l)}" > /tmp/st-out/'"$NAME"'.timing.json
' "$STUDY" "$@" < /dev/null > /dev/null 2>&1 &
echo "started tuner.run for $NAME (pid $!) at $(date +%T)"
