#!/bin/bash
# DEVICE: step trace of vLLM 0.26.0's engine core (.gpu/trace/sitecustomize.py) beside vllm bench --save-detailed:
# Qwen3-4B at 16 req/s and Qwen3-8B at 6 and 12 req/s (2048/512, 300 prompts, Poisson, seed 0, engine defaults,
# dummy weights). Why: which CPU and GPU phases make a prompt step's interval, and why 8B splits a one-prompt step
# around the decodes' tokens where 4B holds even three-prompt steps (issue 17; docs/sim.md).
set -u
T=$(date +%s)
mkdir -p $OUT
bash .gpu/recipe/setup_device.sh
run() {  # NAME MODELDIR RATES DEADLINE_S
  rm -rf .gpu/model && cp -r $2 .gpu/model
  export STEP_TRACE_DIR=/tmp/trace_$1; rm -rf $STEP_TRACE_DIR
  DEADLINE=$(( T + $4 )) RATES="$3" NP=300 WARMUPS=4 bash .gpu/p9/run_rates.sh $1
  sleep 1; mkdir -p $OUT/trace_$1; cp $STEP_TRACE_DIR/*.jsonl $OUT/trace_$1/ 2>/dev/null
  unset STEP_TRACE_DIR
}
run q4t .gpu/model4 "16" 250
rm -rf .gpu/model8 && cp -r .gpu/model4 .gpu/model8 && cp .gpu/p9/config8.json .gpu/model8/config.json
run q8t .gpu/model8 "6 12" 560
cd $OUT && tar czf p9.tgz * --remove-files 2>/dev/null; ls -la $OUT
