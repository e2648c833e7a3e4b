#!/bin/bash
# DEVICE: real vLLM servers (the GPU recipe's pack, dummy weights), each measured by servetune's own client at several
# Poisson rates (scripts/h200/client_rates.py), one server after another; $OUT gets one tarball, client_sweep.tgz.
# usage: bash scripts/h200/client_sweep.sh DEADLINE_S "NAME|MODEL_DIR|RATES|NP|IN|ON|SERVE ARGS" ...
# (after the recipe's setup: .gpu/recipe/setup_device.sh, which this runs first; MODEL_DIR holds config.json and a
# tokenizer; SERVE ARGS are extra `vllm serve` flags, space-separated, none with spaces in them)
set -u
T=$(date +%s)
DL=$((T + $1)); shift
bash .gpu/recipe/setup_device.sh || exit 1
[ -f /tmp/vsite/.ok ] || { echo "pack not unpacked yet"; exit 0; }
export PYTHONPATH=/tmp/vsite$( [ -d /tmp/vsite_extra ] && echo :/tmp/vsite_extra )
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1 VLLM_SERVER_DEV_MODE=1
R=/tmp/sweep; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee $R/gpu.txt
for spec in "$@"; do
  IFS='|' read -r NAME MD RATES NP IN ON ARGS <<< "$spec"
  mkdir -p $R/$NAME
  echo "== $NAME: $MD rates $RATES np $NP $IN/$ON args: $ARGS | $(( DL - $(date +%s) )) s left"
  T0=$(date +%s.%N)
  # shellcheck disable=SC2086  # ARGS: the flags, one word each
  setsid python3 -m vllm.entrypoints.cli.main serve $PWD/$MD --load-format dummy --served-model-name m \
    --host 127.0.0.1 --port 8000 $ARGS > $R/$NAME/server.log 2>&1 &
  SPID=$!
  HT=$(( DL - $(date +%s) - 60 )); [ $HT -gt 400 ] && HT=400
  START_S=$(python3 .gpu/recipe/wait_health.py http://127.0.0.1:8000/health $HT $SPID $T0)
  RC=$?
  echo "$NAME start_to_healthy_s=$START_S rc=$RC args=$ARGS" | tee $R/$NAME/start.txt
  if [ $RC -eq 0 ]; then
    python3 scripts/h200/client_rates.py http://127.0.0.1:8000 m $R/$NAME "$RATES" --np $NP --input $IN --output $ON \
      --deadline $DL 2>&1 | tee $R/$NAME/client.log | grep -v "^    "
  else
    grep -v "^    " $R/$NAME/server.log | tail -30
  fi
  kill -TERM -- -$SPID 2>/dev/null
  for i in $(seq 1 40); do kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- -$SPID 2>/dev/null
  for i in $(seq 1 40); do
    U=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    [ "${U:-0}" -lt 2000 ] && break; sleep 0.5
  done
  grep -E "KV cache|Maximum concurrency|max_num_seqs|max_num_batched" $R/$NAME/server.log | cut -c1-200 | head -6
  gzip -f $R/$NAME/server.log
done
tar czf $OUT/client_sweep.tgz -C $R .
ls -la $OUT
echo "done in $(( $(date +%s) - T )) s"
