#!/bin/bash
# DEVICE: run (or continue) a servetune study on the H200 host within this command's time.
# usage: bash scripts/h200/run_study.sh STUDY.yaml SECONDS [TRIALS] [ENQUEUE_JSON] [EXECUTOR]
#   SECONDS: wall time this command may spend on trials (the driver starts no trial it cannot finish;
#   15 s past it the driver is stopped, and each trial's server is then ended by its reaper)
#   Trials run one per GPU at a time, on every GPU the machine has; EXECUTOR `ray` runs each as a Ray
#   task holding one GPU (needs /tmp/raysite, scripts/h200/build_ray_pack.sh), default `process`.
#   TRIAL_ESTIMATE_S (env): the wall a trial is assumed to take until one has been measured (300).
# Needs /tmp/vsite and /tmp/site (scripts/h200/setup_device.sh). Writes trials.parquet, summary.json,
# trials.tar.gz and driver_stdout.log to $OUT.
set -u
STUDY=$1; SECS=$2; TRIALS=${3:-1}; ENQ=${4:-}; EXECUTOR=${5:-process}
NAME=$(basename "$STUDY" .yaml)
O=${OUT:-/tmp/out}; mkdir -p "$O"
export PYTHONPATH=/tmp/vsite:/tmp/site$( [ -f /tmp/raysite/.ok ] && echo :/tmp/raysite )
export PYTHONUNBUFFERED=1
# keep NVLink multicast off (KINDS.md); torch.compile + Triton caches persist under /tmp while the host is up
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VLLM_CACHE_ROOT=/tmp/vllm_cache TRITON_CACHE_DIR=/tmp/triton_cache
export RAY_USAGE_STATS_ENABLED=0
DEADLINE=$(( $(date +%s) + SECS ))
timeout $(( SECS + 15 )) python3 scripts/h200/device_study.py "$STUDY" --out "$O" --state "/tmp/st_$NAME" --deadline $DEADLINE \
  --trials "$TRIALS" ${ENQ:+--enqueue "$ENQ"} --executor "$EXECUTOR" --trial-estimate-s "${TRIAL_ESTIMATE_S:-300}" 2>&1 | tee "$O/driver_stdout.log" | grep -v "^    " | tail -60
du -sh /tmp/vllm_cache 2>/dev/null
