#!/bin/bash
# DEVICE: a second server instance on the shape split's Qwen3-1.7B and -4B points (issue 17): the references' own
# commands (engine defaults, vllm bench serve 2048/512, seed 0, 100 prompts at the low rates, 300 at the others,
# prefix cache reset per rate), one server per shape. How far apart do two instances' P99 TTFT / ITL land?
set -u
mkdir -p $OUT
python3 - <<'PY'
import re
s = open(".gpu/recipe/run_rates.sh").read()
s = s.replace("MODEL=$PWD/.gpu/model", "MODEL=$PWD/$SHAPE_DIR")
old = "  timeout $((DEADLINE - $(date +%s) + 5)) python3 .gpu/recipe/bench_rates.py $NAME $O $MODEL $RATES > $L/bench_$NAME.log 2>&1\n"
assert old in s
new = ("  NP=100 timeout $((DEADLINE - $(date +%s) + 5)) python3 scripts/h200/bench_rates.py $NAME $O $MODEL $LOW > $L/bench_$NAME.log 2>&1\n"
       "  NP=300 timeout $((DEADLINE - $(date +%s) + 5)) python3 scripts/h200/bench_rates.py $NAME $O $MODEL $RATES >> $L/bench_$NAME.log 2>&1\n")
open("/tmp/rr8.sh", "w").write(s.replace(old, new))
PY
# usage: bash .gpu/p8/probe8.sh 17|4
T=$(date +%s)
case $1 in
  17) SHAPE_DIR=.gpu/model17 LOW="2 6" RATES="16 24 32" WARMUPS=8 DEADLINE=$((T + 520)) bash /tmp/rr8.sh q17i2 ;;
  4) SHAPE_DIR=.gpu/model4 LOW="2 5" RATES="8 12 16 20" WARMUPS=8 DEADLINE=$((T + 520)) bash /tmp/rr8.sh q4i2 ;;
esac
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > $OUT/gpu_$1.txt
cd $OUT && tar czf probe8_$1.tgz --remove-files $(ls | grep -v probe8) ; ls -la $OUT
