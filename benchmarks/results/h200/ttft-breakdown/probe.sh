#!/bin/bash
# DEVICE: start `vllm serve` on a dummy-weight model dir, run benchmarks/ttft_breakdown.py, stop it.
# usage: bash .gpu/probe.sh MODEL_DIR NAME [extra serve args]   (STREAMS="16 64 1": also the --streams runs)
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
  if [ -n "$STREAMS" ]; then  # STREAMS="16 64 1": the second run (Qwen3-8B), these alone; see README
    for K in $STREAMS; do
      timeout 150 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --background 150 \
        --streams $K --seed $K --lens 16,2048 --n 8 --json $O/ttft_${NAME}_bg$K.json 2>&1 | tee $O/ttft_${NAME}_bg$K.txt
    done
  else
    timeout 200 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy \
      --lens ${LENS:-16,512,2048,4096} --n ${N:-12} --json $O/ttft_$NAME.json 2>&1 | tee $O/ttft_$NAME.txt
    timeout 120 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --background 150 \
      --lens 16,2048 --n 10 --json $O/ttft_${NAME}_bg.json 2>&1 | tee $O/ttft_${NAME}_bg.txt
  fi
else
  grep -v "^    " $O/server_$NAME.log | tail -30
fi
kill -TERM -- -$SPID 2>/dev/null
for i in $(seq 1 60); do kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$SPID 2>/dev/null
for i in $(seq 1 60); do U=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1); [ "${U:-0}" -lt 2000 ] && break; sleep 0.5; done
grep -E "Using FlashAttention|async|compil|graph" $O/server_$NAME.log | grep -v "^    " | cut -c1-200 | head -12 > $O/serverinfo_$NAME.txt
