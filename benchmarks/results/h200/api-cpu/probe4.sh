#!/bin/bash
# DEVICE: Qwen3-1.7B (dummy weights) under Poisson load (2048/512, 300 prompts at 24 and 16 req/s) while sampling every
# thread's CPU time: is the API server or the engine core saturated?
rm -rf .gpu/model && cp -r .gpu/model17 .gpu/model
mkdir -p $OUT
python3 .gpu/cpu_sampler.py $OUT/cpu_samples.jsonl 400 &
CS=$!
DEADLINE=$(( $(date +%s) + 330 )) RATES="24 16" NP=300 WARMUPS=4 bash .gpu/recipe/run_rates.sh q17load
kill $CS 2>/dev/null
ps -eo pid,pgid,comm,args | grep -i "vllm\|python" | cut -c1-160 > $OUT/procs.txt
cd $OUT && tar czf q17load.tgz * --remove-files 2>/dev/null; ls $OUT
