#!/bin/bash
# DEVICE: wait for the detached studies (scripts/h200/run_detached.sh) up to SECONDS, printing their
# progress, then copy what they have written so far to $OUT (8 files at most: 4 per study, 2 studies).
# usage: bash scripts/h200/collect.sh SECONDS
set -u
END=$(( $(date +%s) + $1 ))
seen=0
while [ ! -f /tmp/res/.done ] && [ "$(date +%s)" -lt "$END" ]; do
  n=$(wc -l < /tmp/res/chain.log 2>/dev/null || echo 0)
  [ "$n" -gt "$seen" ] && sed -n "$((seen + 1)),${n}p" /tmp/res/chain.log | grep -E "trial|stop|left|done|Error|error" | cut -c1-300
  seen=$n; sleep 5
done
O=${OUT:-/tmp/out}
for d in /tmp/res/*/; do
  [ -d "$d" ] || continue
  mkdir -p "$O/$(basename "$d")"
  cp "$d"/trials.parquet "$d"/summary.json "$d"/trials.tar.gz "$d"/driver_stdout.log "$O/$(basename "$d")/" 2>/dev/null
done
[ -f /tmp/res/.done ] && echo "chain done" || echo "chain still running"
nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader
