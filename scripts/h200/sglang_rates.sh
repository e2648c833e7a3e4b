#!/bin/bash
# DEVICE: a Poisson rate sweep against ONE SGLang server (the pack of build_sglang_pack.sh, unpacked in
# /tmp/sglsite by .gpu/sgl/dev.sh setup), measured with vLLM's `vllm bench serve` from servetune's bundle
# (/tmp/servetune-site) through scripts/h200/bench_rates.py: the same client, workload and per-request files
# as the vLLM sweeps, so the simulator's SGLang terms are fitted on data comparable with the vLLM sets.
# usage: RATES="3 5 7" NP=300 bash scripts/h200/sglang_rates.sh NAME [sglang serve args]
# env: MODEL_DIR (.gpu/model) ATTN (triton) PORT (30000) NP IN ON SEED WARMUPS DEADLINE (as bench_rates.py)
set -uo pipefail
NAME=${1:?usage: sglang_rates.sh NAME [args]}; shift
T_SCRIPT=$(date +%s)
export DEADLINE=${DEADLINE:-$((T_SCRIPT + 540))}
M=${MODEL_DIR:-.gpu/model}; SS=/tmp/sglsite; SITE=${SITE:-/tmp/servetune-site}
[ -f $SS/.ok ] || { echo "error: $SS not unpacked; run bash .gpu/sgl/dev.sh setup with every part" >&2; exit 2; }
export PORT=${PORT:-30000}
O=${OUT:-/tmp/out}; mkdir -p "$O"; L=/tmp/logs_$NAME; rm -rf "$L"; mkdir -p "$L"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s.%N)
PYTHONPATH=$SS HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SGLANG_ENABLE_JIT_DEEPGEMM=0 TVM_FFI_DISABLE_TORCH_C_DLPACK=1 \
  setsid python3 -m sglang.launch_server --model-path "$PWD/$M" --load-format dummy \
    --served-model-name qwen3-8b-dummy --host 127.0.0.1 --port "$PORT" \
    --attention-backend "${ATTN:-triton}" --sampling-backend pytorch "$@" > "$L/server_$NAME.log" 2>&1 &
SPID=$!
HT=$((DEADLINE - $(date +%s) - 90))
START_S=$(python3 .gpu/recipe/wait_health.py "http://127.0.0.1:$PORT/health" $HT $SPID $T0)
RC=$?
echo "$NAME start_to_healthy_s=$START_S rc=$RC serve_args=$* attn=${ATTN:-triton} rates=$RATES np=${NP:-200}" | tee "$O/start_$NAME.txt"
if [ $RC -eq 0 ]; then
  PYTHONPATH=$SITE RESET_PATH=/flush_cache DETAILED=1 timeout $((DEADLINE - $(date +%s) + 5)) \
    python3 scripts/h200/bench_rates.py "$NAME" "$O" "$PWD/$M" $RATES > "$L/bench_$NAME.log" 2>&1
  echo "bench_rates rc=$?"
  grep "^\[bench_rates" "$L/bench_$NAME.log"
  grep -v "^    " "$L/bench_$NAME.log" | grep -E "Traceback|Error|error" | head -10
else
  tail -40 "$L/server_$NAME.log"
fi
kill -TERM -- -$SPID 2>/dev/null
for _ in $(seq 1 40); do kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$SPID 2>/dev/null
grep -E "max_total_num_tokens|chunked_prefill_size|max_running_requests|Capture|KV Cache|mem usage" "$L/server_$NAME.log" | cut -c1-220 | head -12
tar -czf "$O/logs_$NAME.tar.gz" -C "$L" .
echo "== $NAME done in $(( $(date +%s) - T_SCRIPT )) s"
