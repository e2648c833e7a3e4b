#!/bin/bash
# DEVICE: wait up to SECONDS for the detached study (scripts/h200/tuner_run.sh NAME) to end, showing the
# driver's progress, then pack what it has written so far into $OUT (at most 8 files come back, 16 MiB
# each): the study folder as one tarball, the driver log and the timing.
# usage: bash scripts/h200/tuner_collect.sh NAME SECONDS
set -u
NAME=$1; END=$(( $(date +%s) + $2 ))
LOG=/tmp/st-out/$NAME.log; seen=0
while [ ! -f /tmp/st-out/$NAME.timing.json ] && [ "$(date +%s)" -lt "$END" ]; do
  n=$(wc -l < "$LOG" 2>/dev/null || echo 0)
  [ "$n" -gt "$seen" ] && sed -n "$((seen + 1)),${n}p" "$LOG" | grep -iE "trial|error|capacity|promot|Traceback|failed" | grep -v "^\s*$" | cut -c1-240 | tail -20
  seen=$n; sleep 10
done
O=${OUT:-/tmp/out}; mkdir -p "$O"
[ -d /tmp/st-out/$NAME ] && tar -czf "$O/$NAME.tar.gz" -C /tmp/st-out "$NAME"
cp "$LOG" /tmp/st-out/$NAME.timing.json "$O/" 2>/dev/null
ls -la "$O"
[ -f /tmp/st-out/$NAME.timing.json ] && { echo "study ended: $(cat /tmp/st-out/$NAME.timing.json)"; } || echo "study still running"
tail -25 "$LOG" | cut -c1-300
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader
