#!/bin/bash
# DEVICE: Qwen3-8B (dummy weights, engine defaults) under Poisson load (2048/512, 300 prompts at 12, 8 and 4 req/s):
# /metrics snapshots before/after each rate (the engine's queue, prefill, TTFT histograms: where TTFT goes under load)
# and every thread's CPU time every 0.5 s (the API server's CPU per streamed token on the fitted shape). Issue 17.
mkdir -p $OUT
python3 .gpu/cpu_sampler.py $OUT/cpu_samples.jsonl 480 &
CS=$!
DEADLINE=$(( $(date +%s) + 430 )) RATES="12 8 4" NP=300 WARMUPS=4 bash .gpu/p6/run_rates.sh q8load
kill $CS 2>/dev/null
ps -eo pid,pgid,comm,args | grep -i "vllm\|python" | cut -c1-160 > $OUT/procs.txt
cd $OUT && tar czf q8load.tgz * --remove-files 2>/dev/null; ls -la $OUT
