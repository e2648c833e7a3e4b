#!/bin/bash
# LOCAL: the wheels the device-side driver needs that the H200 image lacks (checked against
# /work/.library/device/KINDS.md's package list): optuna and colorlog, and pydantic 2 (+ its three
# helpers) at exactly the versions inside the vLLM pack, so the driver can be checked in the first
# command, before the pack is complete. Everything else it imports (numpy, pyarrow, aiohttp, pyyaml,
# tqdm, packaging, nvidia-ml-py) is in the image. Output: .gpu/whl/*.whl (3 MB, carried as `.gpu/whl`).
# usage: bash scripts/h200/fetch_wheels.sh   (from the repo root)
set -euo pipefail
mkdir -p .gpu/whl
for spec in optuna==5.0.0 colorlog==6.12.0 pydantic==2.13.4 pydantic_core==2.46.4 annotated_types==0.8.0 \
    typing_inspection==0.4.2; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl "$spec"
done
ls -la .gpu/whl
