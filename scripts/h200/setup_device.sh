#!/bin/bash
# DEVICE, every command: stash the carried pack chunks, unpack the vLLM pack once both are there,
# install the driver's wheels once. After ../shared/gpu/setup_device.sh (same chunk logic and checks),
# minus its closing `import vllm` check, which costs ~15 s of device time: the first server start
# reports the same problems in its engine.log, which comes back with the results.
# Carried paths used: .gpu/c/part_* (one per command), .gpu/recipe/pack.sha256, .gpu/whl (command 1).
set -e
NPARTS=2
VS=/tmp/vsite
mkdir -p /tmp/chunks
for p in .gpu/c/part_*; do [ -f "$p" ] && cp "$p" /tmp/chunks/ && echo "stashed $p"; done
if [ ! -f /tmp/site/.ok ] && [ -d .gpu/whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
  touch /tmp/site/.ok && echo "driver wheels installed in /tmp/site"
fi
if [ ! -f $VS/.ok ]; then
  n=$(ls /tmp/chunks | wc -l)
  if [ "$n" -lt $NPARTS ]; then echo "have $n of $NPARTS chunks; send the next one"; exit 0; fi
  t0=$(date +%s)
  cat $(ls /tmp/chunks/part_* | sort) > /tmp/site.tar.xz
  echo "$(cat .gpu/recipe/pack.sha256)  /tmp/site.tar.xz" | sha256sum -c -
  mkdir -p $VS
  xz -dc -T0 /tmp/site.tar.xz | tar -xf - -C $VS
  rm -f /tmp/site.tar.xz
  touch $VS/.ok
  echo "unpacked in $(( $(date +%s) - t0 )) s: $(du -sh $VS | cut -f1)"
  env -u PYTHONPATH python3 .gpu/recipe/check_deps.py
fi
