#!/bin/bash
# DEVICE: one server, the breakdown with 16 and 64 requests decoding beside each probe
M=$1; NAME=$2; shift 2
export PYTHONPATH=/tmp/vsite$( [ -d /tmp/vsite_extra ] && echo :/tmp/vsite_extra )
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
O=$OUT/ttft; mkdir -p $O
T0=$(date +%s.%N)
setsid python3 -m vllm.entrypoints.cli.main serve $PWD/$M --load-format dummy --served-model-name dummy \
  --host 127.0.0.1 --port 8000 "$@" > $O/server_$NAME.log 2>&1 &
SPID=$!
S=$(python3 .gpu/recipe/wait_health.py http://127.0.0.1:8000/health ${HEALTH_TIMEOUT:-300} $SPID $T0); RC=$?
echo "$NAME start_to_healthy_s=$S rc=$RC"
if [ $RC -eq 0 ]; then
  for K in 16 64; do
    timeout 150 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --background 150 \
      --streams $K --lens 16,2048 --n 8 --json $O/ttft_${NAME}_bg$K.json 2>&1 | tee $O/ttft_${NAME}_bg$K.txt
  done
  timeout 100 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --background 150 \
      --streams 1 --lens 16,2048 --n 8 --json $O/ttft_${NAME}_bg1.json 2>&1 | tee $O/ttft_${NAME}_bg1.txt
fi
kill -TERM -- -$SPID 2>/dev/null
for i in $(seq 1 60); do kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$SPID 2>/dev/null
