#!/bin/bash
# LOCAL, after .gpu/recipe/build_pack.sh: add Ray to what travels, for two trials at once through Ray
# on the 2-GPU host (python -m tuner.run with Ray Tune trials). Ray 2.60.0's cp312 wheel is 79.3 MB, more than a
# command carries beside the vLLM pack; trimmed of what a local Ray core never loads (the Java jars, the
# dashboard's web client, RLlib, Ray LLM) and xz-compressed it is ~25 MB. The vLLM pack (.gpu/c/part_*)
# and the Ray tarball are then re-cut into NPARTS equal chunks, .gpu/p/part_*, so that each command
# carries one chunk beside the working tree (64 MiB in all): NPARTS=3 gives 44.8 MiB chunks (the
# 2026-11-29 run, with a 10 MiB tree), the default 4 gives 33.6 MiB (room for a ~25 MiB tree). Ray's
# own dependencies the image may lack (msgpack, jsonschema and its helpers, requests) go to .gpu/whl
# with the driver's wheels.
# usage: bash scripts/h200/build_ray_pack.sh   (from the repo root; needs ~600 MB in $W)
set -euo pipefail
W=${W:-/tmp/ray_pack}
NPARTS=${NPARTS:-4}
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64"
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d "$@"; }
mkdir -p $W/whl .gpu/whl
dl $W/whl ray==2.60.0
for spec in msgpack==1.2.4 jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications==2025.9.1 \
    rpds-py==2026.9.1 attrs==26.1.0 requests==2.34.2 urllib3==2.8.0 certifi==2026.10.19.post1 \
    charset-normalizer==3.5.3 idna==3.20; do
  dl .gpu/whl "$spec"
done
rm -rf $W/site && mkdir -p $W/site && (cd $W/site && unzip -q $W/whl/ray-2.60.0-*.whl)
rm -rf $W/site/ray/jars $W/site/ray/rllib $W/site/ray/dashboard/client $W/site/ray/llm
find $W/site -name __pycache__ -type d -prune -exec rm -rf {} +
(cd $W/site && tar -cf - . | xz -9 -T0 > $W/ray.tar.xz)
cat $(ls .gpu/c/part_* | sort) > $W/vllm.tar.xz
echo "$(cat .gpu/recipe/pack.sha256)  $W/vllm.tar.xz" | sha256sum -c -
tar -cf $W/blob.tar -C $W vllm.tar.xz ray.tar.xz
sha256sum $W/blob.tar | cut -d' ' -f1 > .gpu/recipe/blob.sha256
echo "$NPARTS" > .gpu/recipe/blob.nparts
mkdir -p .gpu/p && rm -f .gpu/p/part_*
split -n "$NPARTS" -d -a 1 $W/blob.tar .gpu/p/part_
ls -la $W/ray.tar.xz .gpu/p .gpu/whl
