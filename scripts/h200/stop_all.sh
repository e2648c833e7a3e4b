#!/bin/bash
# DEVICE: end every study process this project started (detached chain, drivers, Ray, engine servers)
# and wait until no process holds a GPU. Patterns live in this file, not on the command line, so that
# the command that runs it is not matched itself; this script's own ancestors are spared.
keep=" $$ "; p=$$
while [ "$p" -gt 1 ]; do p=$(ps -o ppid= -p "$p" | tr -d ' '); keep="$keep$p "; done
for pid in $(pgrep -f 'tuner\.run|raylet|gcs_server|ray::|default_worker|vllm|dashboard/agent'); do
  case "$keep" in *" $pid "*) ;; *) kill -9 "$pid" 2>/dev/null ;; esac
done
for _ in $(seq 90); do
  [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 1
done
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
