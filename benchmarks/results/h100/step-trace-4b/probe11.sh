#!/bin/bash
# DEVICE: vLLM 0.26.0 engine-core step trace (.gpu/trace/sitecustomize.py) beside vllm bench --save-detailed,
# the reference q4b_np300 conditions (Qwen3-4B shape, dummy weights, engine defaults, 2048/512, 300 prompts, Poisson,
# seed 0, prefix cache reset between rates). usage: bash .gpu/p11/probe.sh NAME SHAPE_DIR "RATES" DEADLINE_S
set -u
T=$(date +%s)
mkdir -p $OUT
bash .gpu/recipe/setup_device.sh || exit 1
[ -f /tmp/vsite/.ok ] || { echo "pack not unpacked yet"; exit 0; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $OUT/gpu_$1.txt
export STEP_TRACE_DIR=/tmp/trace_$1; rm -rf $STEP_TRACE_DIR; mkdir -p $STEP_TRACE_DIR
SITE="$PWD/.gpu/trace:/tmp/vsite" SHAPE_DIR=$2 DEADLINE=$((T + $4)) RATES="$3" NP=300 HEALTH_TIMEOUT=330 \
  bash scripts/h200/shape_rates.sh $1
sleep 1
mkdir -p /tmp/pack_$1/trace_$1
for f in $STEP_TRACE_DIR/*.jsonl; do [ -s "$f" ] && gzip -c "$f" > /tmp/pack_$1/trace_$1/$(basename $f).gz; done
mv $OUT/* /tmp/pack_$1/ 2>/dev/null
tar czf $OUT/p11_$1.tgz -C /tmp/pack_$1 .
ls -la $OUT; du -sh /tmp/pack_$1/trace_$1
