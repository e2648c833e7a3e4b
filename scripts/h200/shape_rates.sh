#!/bin/bash
# DEVICE: the recipe's Poisson rate sweep (../shared/gpu/run_rates.sh: one `vllm serve`, `vllm bench serve`
# at each rate, 2048/512 tokens, prefix cache reset between rates) on ANOTHER model shape, with the vLLM of
# servetune's bundle (/tmp/servetune-site), for the simulator's leave-one-shape-out check (issue 17).
# The model folder is config.json + the dummy tokenizer (scripts/h200/make_shape_model.py), random weights.
# usage: SHAPE_DIR=.gpu/model-qwen3-14b RATES="3 4.5 6" bash scripts/h200/shape_rates.sh NAME [serve args]
# The benches run through scripts/h200/bench_rates.py (DETAILED=1 by default: per-request data in each JSON).
set -euo pipefail
M=${SHAPE_DIR:?set SHAPE_DIR to the model folder}
SITE=${SITE:-/tmp/servetune-site}
[ -f "$M/config.json" ] || { echo "error: $M/config.json missing" >&2; exit 2; }
sed -e "s#^MODEL=.*#MODEL=$PWD/$M#" -e "s#^export PYTHONPATH=.*#export PYTHONPATH=$SITE#" \
  -e "s#python3 .gpu/recipe/bench_rates.py#python3 scripts/h200/bench_rates.py#" \
  .gpu/recipe/run_rates.sh > /tmp/run_rates_shape.sh
exec bash /tmp/run_rates_shape.sh "$@"
