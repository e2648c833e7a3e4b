#!/bin/bash
# LOCAL (x86-64, internet, pip): build the carried package for SGLang on the H200 host, the way
# ../shared/gpu/build_pack.sh does for vLLM. Output (ignored, under .gpu/sgl/):
#   c/part_0..N-1  equal chunks (<= 44 MiB each) of one xz tarball of a `pip --target` tree
#   pack.sha256    sha256 of that tarball;  wheels.sha256  sha256 of every wheel used
#   dev.sh         DEVICE helper: `setup` (stash chunk, unpack into /tmp/sglsite once all are there)
#                  and `serve` (launch sglang on .gpu/model with --load-format dummy, probe, stop)
# The tree holds sglang 0.5.17 (newest release pinning torch==2.11.0, the host's) + sglang-kernel 0.4.5
# + flashinfer 0.6.15.post1 (JIT sources, compiled with the host's nvcc) + the packages below that
# the image lacks or has at a version sglang's pins reject (transformers 5.12.1 needs tokenizers<=0.23.0).
# Not carried (not imported by launch_server -> http_server -> engine/scheduler -> model_runner ->
# qwen3 -> triton/flashinfer backends, or only behind try/except or env switches): tilelang,
# nvidia-mathdx, nvidia-cutlass-dsl, flash-attn-4, quack-kernels, humming-kernels, tokenspeed-mla,
# sgl-deep-gemm, helion, torchao, kernels, modelscope, mistral_common, anthropic, datasets, outlines,
# llguidance, openai-harmony, torchcodec, blobfile, smg-grpc-servicer, py-spy (docs/sglang-h200.md).
# usage: [XZ_LEVEL=1] [CHUNK_MIB=30] bash scripts/h200/build_sglang_pack.sh   (from the repo root; ~3 GB in $W)
set -euo pipefail
W=${W:-/tmp/sgl_pack}
O=.gpu/sgl
CHUNK_MIB=${CHUNK_MIB:-44}
PLAT="--platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64"
WHEELS="sglang==0.5.17 sglang-kernel==0.4.5 flashinfer-python==0.6.15.post1 apache-tvm-ffi==0.1.11
  xgrammar==0.2.1 torch-memory-saver==0.0.10 transformers==5.12.1 tokenizers==0.22.2
  compressed-tensors==0.20.1 loguru==0.7.3 gguf==0.19.0 openai==2.6.1 jiter==0.16.0 distro==1.9.0
  sniffio==1.3.1 fastapi==0.136.3 starlette==1.3.1 uvicorn==0.51.0 python-multipart==0.0.34
  pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.8.0 typing-inspection==0.4.2
  pyzmq==27.1.0 msgspec==0.21.1 orjson==3.13.0 setproctitle==1.3.7 pybase64==1.4.3
  partial-json-parser==0.2.1.1.post7 watchfiles==1.2.0 zstandard==0.25.0 dill==0.4.1
  jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications==2025.9.1 rpds-py==2026.9.1
  soundfile==0.13.1 cffi==2.1.1 pycparser==3.12
  ipython==9.18.1 traitlets==5.16.1 decorator==5.3.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2
  pexpect==4.9.0 ptyprocess==0.7.0 prompt-toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3
  executing==2.3.0 asttokens==3.0.2 pure-eval==0.2.4 ipython-pygments-lexers==1.1.1"
# 1) download (no deps: the host's image supplies torch, triton, numpy, huggingface_hub, ...)
mkdir -p $W/whl $O/c
for spec in $WHEELS; do
  n=$(echo "${spec%%==*}" | tr - _); v=${spec##*==}
  ls $W/whl/ | grep -qi "^${n}-${v}-" || python3 -m pip download -q --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp $PLAT -d $W/whl "$spec"
done
(cd $W/whl && sha256sum *.whl) > $O/wheels.sha256
echo "wheels: $(ls $W/whl | wc -l), $(du -cb $W/whl/*.whl | tail -1 | cut -f1) bytes"
# 2) unpack into one target tree
rm -rf $W/site && python3 -m pip install -q --no-index --no-deps --no-compile --only-binary=:all: \
    --python-version 3.12 --implementation cp $PLAT --target $W/site $W/whl/*.whl
# 3) trim what a dense bf16 model on one H200 (SM90) with --attention-backend triton|flashinfer never loads:
#  - sgl_kernel/flash_ops.abi3.so (1.1 GB): FA3, imported only by sgl_kernel/flash_attn.py
#    (--attention-backend fa3, ViT attention on XPU, sglang.kernels.ops.attention.flash_attention_v3)
#  - sgl_kernel/sm100: load_utils picks sm90/common_ops when the device's capability is 90
#  - sgl_kernel/flashmla_ops (MLA models; its import in flash_mla.py is try-guarded) and
#    infllm_ops (loaded lazily by NSA attention only)
#  - xgrammar/lib/libxgrammar.a: static library for C++ linking; Python loads libxgrammar_bindings.so
#  - sglang/multimodal_gen: the diffusion runtime, imported only by the `sglang` CLI, not launch_server
cd $W/site
rm -rf bin sgl_kernel/flash_ops.abi3.so sgl_kernel/sm100 sgl_kernel/flashmla_ops.abi3.so \
       sgl_kernel/infllm_ops*.so xgrammar/lib/libxgrammar.a sglang/multimodal_gen
find . -name __pycache__ -type d -prune -exec rm -rf {} +
echo "tree: $(du -sb . | cut -f1) bytes"
# 4) compress, record the sum, cut into equal chunks of at most CHUNK_MIB MiB
tar -cf - . | xz -${XZ_LEVEL:-9} -T0 > $W/site.tar.xz  # XZ_LEVEL=1: minutes, not tens of minutes, on a loaded 2-core machine
cd - >/dev/null
SZ=$(stat -c %s $W/site.tar.xz)
N=$(( (SZ + CHUNK_MIB * 1048576 - 1) / (CHUNK_MIB * 1048576) ))
sha256sum $W/site.tar.xz | cut -d' ' -f1 > $O/pack.sha256
rm -f $O/c/part_* && split -n $N -d -a 1 $W/site.tar.xz $O/c/part_
echo "xz: $SZ bytes in $N chunks"
# 5) the device helper (carried as .gpu/sgl/dev.sh; .gpu/ is ignored, so name it in every command)
cat > $O/dev.sh <<EOF
#!/bin/bash
# DEVICE, repo root. bash .gpu/sgl/dev.sh setup        stash .gpu/sgl/c/part_*; unpack once all $N are in /tmp
#                    bash .gpu/sgl/dev.sh serve [ARGS] start sglang, wait for /health, 1 request, stop
NPARTS=$N
SUM=$(cat $O/pack.sha256)
EOF
cat >> $O/dev.sh <<'EOF'
SS=/tmp/sglsite; OUTD=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
setup() {
  mkdir -p /tmp/sglchunks
  for p in .gpu/sgl/c/part_*; do [ -f "$p" ] && cp "$p" /tmp/sglchunks/ && echo "stashed $p"; done
  [ -f $SS/.ok ] && return 0
  n=$(ls /tmp/sglchunks | wc -l)
  if [ "$n" -lt $NPARTS ]; then echo "have $n of $NPARTS chunks; send the next one"; return 0; fi
  t0=$(date +%s); cat $(ls /tmp/sglchunks/part_* | sort) > /tmp/sgl.tar.xz
  echo "$SUM  /tmp/sgl.tar.xz" | sha256sum -c - || return 1
  mkdir -p $SS
  if command -v xz >/dev/null; then xz -dc -T0 /tmp/sgl.tar.xz | tar -xf - -C $SS || return 1
  else python3 -c "import tarfile; tarfile.open('/tmp/sgl.tar.xz').extractall('$SS')" || return 1; fi
  rm -f /tmp/sgl.tar.xz && touch $SS/.ok
  echo "unpacked in $(( $(date +%s) - t0 )) s: $(du -sh $SS | cut -f1)"
  PYTHONPATH=$SS python3 -c "import torch, transformers, tokenizers, sgl_kernel, flashinfer, xgrammar, sglang.srt.entrypoints.http_server as h; print('sglang import ok', transformers.__version__, tokenizers.__version__, torch.__version__)" 2>&1 | tail -5
}
http() {  # METHOD PATH TIMEOUT [JSON]: the image has python3 for sure, curl maybe not
  python3 -c "import sys, urllib.request as u; d=sys.argv[4].encode() if len(sys.argv)>4 else None
r=u.Request('http://127.0.0.1:$PORT'+sys.argv[2], data=d, method=sys.argv[1], headers={'Content-Type': 'application/json'})
print(u.urlopen(r, timeout=float(sys.argv[3])).read().decode())" "$@"
}
serve() {
  [ -f $SS/.ok ] || { echo "not unpacked"; return 1; }
  PORT=${PORT:-30000}; T=${HEALTH_TIMEOUT:-480}; t0=$(date +%s)
  PYTHONPATH=$SS HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SGLANG_ENABLE_JIT_DEEPGEMM=0 \
    setsid python3 -m sglang.launch_server --model-path .gpu/model --load-format dummy \
      --served-model-name qwen3-8b-dummy --host 127.0.0.1 --port $PORT \
      --attention-backend ${ATTN:-triton} --sampling-backend pytorch "$@" > $OUTD/sgl_server.log 2>&1 &
  pid=$!; ok=0
  while [ $(( $(date +%s) - t0 )) -lt $T ]; do
    kill -0 $pid 2>/dev/null || break
    http GET /health 5 >/dev/null 2>&1 && { ok=1; break; }; sleep 2
  done
  echo "health=$ok after $(( $(date +%s) - t0 )) s"
  if [ $ok = 1 ]; then
    http POST /v1/completions 120 '{"model":"qwen3-8b-dummy","prompt":"Hello","max_tokens":32,"temperature":0.7,"ignore_eos":true}' \
      | tee $OUTD/sgl_completion.json | head -c 600; echo
    http GET /get_server_info 10 > $OUTD/sgl_server_info.json
  fi
  kill -- -$pid 2>/dev/null; sleep 5; kill -9 -- -$pid 2>/dev/null
  for i in $(seq 30); do pgrep -f sglang.launch_server >/dev/null || break; sleep 1; done
  tail -40 $OUTD/sgl_server.log; nvidia-smi --query-gpu=memory.used --format=csv,noheader
}
cmd=${1:-setup}; shift || true; $cmd "$@"
EOF
ls -la $O $O/c
