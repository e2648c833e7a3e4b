#!/bin/bash
# DEVICE: one server per shape; bursts of 1/2/4/8 new prompts beside 1 and 16 running decodes (per-request or
# per-step admission cost?); for 14B also the isolated probe.  usage: bash .gpu/probe3.sh MODEL_DIR NAME MODE
M=$1; NAME=$2; MODE=$3
export PYTHONPATH=/tmp/vsite$( [ -d /tmp/vsite_extra ] && echo :/tmp/vsite_extra )
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
O=$OUT/ttft; mkdir -p $O
T0=$(date +%s.%N)
setsid python3 -m vllm.entrypoints.cli.main serve $PWD/$M --load-format dummy --served-model-name dummy \
  --host 127.0.0.1 --port 8000 > $O/server_$NAME.log 2>&1 &
SPID=$!
S=$(python3 .gpu/recipe/wait_health.py http://127.0.0.1:8000/health ${HEALTH_TIMEOUT:-300} $SPID $T0); RC=$?
echo "$NAME start_to_healthy_s=$S rc=$RC"
if [ $RC -eq 0 ]; then
  SEED=100
  if [ "$MODE" = iso ]; then
    timeout 150 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --seed 7 \
      --lens 16,512,2048,4096 --n 12 --json $O/ttft_$NAME.json 2>&1 | tee $O/ttft_$NAME.txt
    timeout 100 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --background 150 --seed 8 \
      --lens 16,2048 --n 10 --json $O/ttft_${NAME}_bg.json 2>&1 | tee $O/ttft_${NAME}_bg.txt
  fi
  for ST in ${STREAMS:-1 16}; do for B in ${BURSTS:-1 2 4 8}; do
    SEED=$((SEED+1))
    echo "== $NAME streams=$ST burst=$B"
    timeout 100 python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model dummy --background 200 \
      --streams $ST --burst $B --seed $SEED --lens 16,2048 --n ${N:-6} --gap-s 0.2 \
      --json $O/burst_${NAME}_s${ST}_b$B.json 2>&1 | tee $O/burst_${NAME}_s${ST}_b$B.txt
  done; done
else
  grep -v "^    " $O/server_$NAME.log | tail -30
fi
kill -TERM -- -$SPID 2>/dev/null
for i in $(seq 1 60); do kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$SPID 2>/dev/null
for i in $(seq 1 60); do U=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1); [ "${U:-0}" -lt 2000 ] && break; sleep 0.5; done
