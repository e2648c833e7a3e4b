#!/bin/bash
# DEVICE: which SGLang launch flag costs ~1.7 ms per step (issue 17). One SGLang 0.5.17 server (the pack that
# .gpu/sgl/dev.sh setup unpacked in /tmp/sglsite) per NAME, started with exactly the flags given, driven by
# servetune's own client (python -m tuner.bench, the image's python3 + the pack's pydantic) at one Poisson
# rate with the round-6 sweep's workload (2048/512 tokens, ignore-eos, 8 warm-ups); the server log's
# decode-batch lines are what benchmarks/calibrate_sglang.py regresses the per-step cost from.
# WORKLOADS="random dynamic" drives one server with the sweep's workload, then the seeds' dynamic mix (what
# servetune's SGLang studies ran): the same server and host for both, so the ~1.7 ms per step that the studies' log
# pays over the sweep's (benchmarks/sglang_step_forms.py) can be put on the workload or on the host. Each phase's
# start and end (UTC and the host clock the server log uses) go to phases.txt, to split the server log by phase;
# the Prefill/Decode batch lines are kept in batches.log.gz.
# WORKLOADS="probe-B-IN ...": B requests of IN prompt tokens and 512 output tokens sent at once (rate inf, no
# warm-ups), so the server decodes a batch of B with no prefill between its log lines (benchmarks/sglang_batch_probe.py).
# usage: RATE=6 NP=300 bash scripts/h200/sglang_flags.sh NAME [sglang flags...]
# env: MODEL_DIR (.gpu/model) PORT (30000) RATE NP DEADLINE (epoch s; the call's end) WORKLOADS (random)
set -uo pipefail
NAME=${1:?usage: sglang_flags.sh NAME [flags]}; shift
T_SCRIPT=$(date +%s)
DEADLINE=${DEADLINE:-$((T_SCRIPT + 300))}
M=${MODEL_DIR:-.gpu/model}; SS=/tmp/sglsite; PORT=${PORT:-30000}
[ -f $SS/.ok ] || { echo "error: $SS not unpacked; run bash .gpu/sgl/dev.sh setup with every part" >&2; exit 2; }
O=${OUT:-/tmp/out}/$NAME; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s.%N)
PYTHONPATH=$SS HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SGLANG_ENABLE_JIT_DEEPGEMM=0 TVM_FFI_DISABLE_TORCH_C_DLPACK=1 \
  setsid python3 -m sglang.launch_server --model-path "$PWD/$M" --load-format dummy \
    --served-model-name qwen3-8b-dummy --host 127.0.0.1 --port "$PORT" "$@" > "$O/server.log" 2>&1 &
SPID=$!
START_S=$(python3 .gpu/recipe/wait_health.py "http://127.0.0.1:$PORT/health" $((DEADLINE - $(date +%s) - 100)) $SPID $T0)
RC=$?
echo "$NAME start_to_healthy_s=$START_S rc=$RC flags=$*" | tee "$O/start.txt"
if [ $RC -eq 0 ]; then
  for W in ${WORKLOADS:-random}; do
    case $W in
      random) DATA=(--dataset-name random --random-input-len 2048 --random-output-len 512 --random-range-ratio 0) ;;
      dynamic) DATA=(--dataset-name dynamic) ;;
      probe-*-*) P=${W#probe-}
        DATA=(--dataset-name random --random-input-len "${P#*-}" --random-output-len 512 --random-range-ratio 0) ;;
      *) echo "error: WORKLOADS: unknown workload '$W' | fix: use random and/or dynamic" >&2; continue ;;
    esac
    SUF=$([ "$W" = random ] && echo "" || echo "_$W")
    LOAD=(--rate "${RATE:-6}" --requests "${NP:-300}" --warmup 8)
    case $W in probe-*-*) P=${W#probe-}; LOAD=(--rate inf --requests "${P%%-*}" --warmup 0) ;; esac
    echo "$W start $(date -u +%FT%T) local $(date '+%F %T')" >> "$O/phases.txt"
    PYTHONPATH=$SS:$PWD timeout $((DEADLINE - $(date +%s) - 20)) python3 -m tuner.bench \
      --url "http://127.0.0.1:$PORT" --model qwen3-8b-dummy "${DATA[@]}" --prompt token_ids "${LOAD[@]}" --seed 0 --metrics-prefix sglang: --no-progress --save-detailed \
      --output "$O/bench$SUF" > "$O/bench$SUF.log" 2>&1
    echo "bench $W rc=$?"; tail -25 "$O/bench$SUF.log"
    echo "$W end $(date -u +%FT%T) local $(date '+%F %T')" >> "$O/phases.txt"
  done
else
  tail -30 "$O/server.log"
fi
kill -TERM -- -$SPID 2>/dev/null
for _ in $(seq 1 40); do kill -0 $SPID 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$SPID 2>/dev/null
for _ in $(seq 1 30); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
grep -E "Prefill batch|Decode batch" "$O/server.log" | gzip > "$O/batches.log.gz"
grep -m1 -o "server_args=.*" "$O/server.log" | gzip > "$O/server_args.txt.gz"
grep -c "Decode batch" "$O/server.log" | sed "s/^/$NAME decode_batch_lines=/"
grep "Decode batch" "$O/server.log" | tail -3 | cut -c1-260
echo "== $NAME done in $(( $(date +%s) - T_SCRIPT )) s"
