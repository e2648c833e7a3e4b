#!/bin/bash
# DEVICE: a blind set for the simulator (issue 17): the recipe's setup, then scripts/h200/shape_rates.sh on one
# server (dummy weights, engine defaults, Poisson, seed 0, --save-detailed, prefix cache reset between rates).
# usage: IN=1024 ON=256 bash .gpu/p13/probe.sh NAME SHAPE_DIR "RATES" DEADLINE_S NP
set -u
T=$(date +%s)
mkdir -p $OUT
bash .gpu/recipe/setup_device.sh || exit 1
[ -f /tmp/vsite/.ok ] || { echo "pack not unpacked yet"; exit 0; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/gpu_$1.txt
SITE=/tmp/vsite SHAPE_DIR=$2 DEADLINE=$((T + $4)) RATES="$3" NP=$5 HEALTH_TIMEOUT=330 \
  bash scripts/h200/shape_rates.sh $1 "${@:6}"
sleep 1
mkdir -p /tmp/pack_$1
for f in $OUT/*; do case $f in *.json) gzip -c $f > /tmp/pack_$1/$(basename $f).gz;; *) cp $f /tmp/pack_$1/;; esac; done
rm -f $OUT/*
tar czf $OUT/p13_$1.tgz -C /tmp/pack_$1 .
ls -la $OUT /tmp/pack_$1
