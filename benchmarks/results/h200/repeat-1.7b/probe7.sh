#!/bin/bash
# DEVICE: Qwen3-1.7B (dummy weights, engine defaults): the same Poisson draw (2048/512, 300 prompts, seed 0) three
# times at 24 req/s and twice at 16 req/s against one server: how far apart do P99 TTFT and P99 ITL land when
# nothing changes but the run? (the noise floor of the shape split's small-model points; issue 17)
rm -rf .gpu/model && cp -r .gpu/model17 .gpu/model
mkdir -p $OUT
DEADLINE=$(( $(date +%s) + 480 )) RATES="24 24.0 24.00 16 16.0" NP=300 WARMUPS=4 bash .gpu/p6/run_rates.sh q17rep
cd $OUT && tar czf q17rep.tgz * --remove-files 2>/dev/null; ls -la $OUT
