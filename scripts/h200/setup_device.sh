#!/bin/bash
# DEVICE, every command: stash the carried pack chunks, unpack once all are there, install the
# driver's wheels once. After ../shared/gpu/setup_device.sh (same chunk logic and checks), minus its
# closing `import vllm` check, which costs ~15 s of device time: the first server start reports the
# same problems in its engine.log, which comes back with the results.
# Two layouts (docs/benchmarks.md):
#   .gpu/c/part_0..1  the vLLM pack alone (checked against .gpu/recipe/pack.sha256)
#   .gpu/p/part_*     the vLLM pack and Ray (scripts/h200/build_ray_pack.sh; .gpu/recipe/blob.sha256, blob.nparts)
# Carried paths used: one chunk per command, .gpu/recipe, .gpu/whl (first command).
set -e
VS=/tmp/vsite
RS=/tmp/raysite
mkdir -p /tmp/chunks /tmp/pchunks
for p in .gpu/c/part_*; do [ -f "$p" ] && cp "$p" /tmp/chunks/ && echo "stashed $p"; done
for p in .gpu/p/part_*; do [ -f "$p" ] && cp "$p" /tmp/pchunks/ && echo "stashed $p"; done
if [ ! -f /tmp/site/.ok ] && [ -d .gpu/whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
  touch /tmp/site/.ok && echo "driver wheels installed in /tmp/site"
fi
[ -f $VS/.ok ] && exit 0
t0=$(date +%s)
if [ "$(ls /tmp/pchunks | wc -l)" -gt 0 ]; then
  n=$(ls /tmp/pchunks | wc -l); want=$(cat .gpu/recipe/blob.nparts 2>/dev/null || echo 3)
  if [ "$n" -lt "$want" ]; then echo "have $n of $want chunks; send the next one"; exit 0; fi
  cat $(ls /tmp/pchunks/part_* | sort) > /tmp/blob.tar
  echo "$(cat .gpu/recipe/blob.sha256)  /tmp/blob.tar" | sha256sum -c -
  mkdir -p $RS && tar -xf /tmp/blob.tar -C /tmp && rm -f /tmp/blob.tar
  xz -dc -T0 /tmp/ray.tar.xz | tar -xf - -C $RS && rm -f /tmp/ray.tar.xz && touch $RS/.ok
  mv /tmp/vllm.tar.xz /tmp/site.tar.xz
else
  n=$(ls /tmp/chunks | wc -l)
  if [ "$n" -lt 2 ]; then echo "have $n of 2 chunks; send the next one"; exit 0; fi
  cat $(ls /tmp/chunks/part_* | sort) > /tmp/site.tar.xz
fi
echo "$(cat .gpu/recipe/pack.sha256)  /tmp/site.tar.xz" | sha256sum -c -
mkdir -p $VS
xz -dc -T0 /tmp/site.tar.xz | tar -xf - -C $VS
rm -f /tmp/site.tar.xz
touch $VS/.ok
echo "unpacked in $(( $(date +%s) - t0 )) s: $(du -sh $VS | cut -f1)$( [ -f $RS/.ok ] && echo ", ray $(du -sh $RS | cut -f1)")"
env -u PYTHONPATH python3 .gpu/recipe/check_deps.py
