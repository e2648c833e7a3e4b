#!/bin/bash
# DEVICE: several blind sets, one server each, back to back (issue 17 confirmatory runs, benchmarks/sim_confirm.py).
# usage: bash .gpu/p14/run.sh "NAME|SHAPE_DIR|RATES|DEADLINE_S|NP|IN|ON" ...   (each: .gpu/p13/probe.sh, its own OUT)
REAL=$OUT
for spec in "$@"; do
  IFS='|' read -r NAME SD RATES DL NP IN ON <<< "$spec"
  mkdir -p /tmp/o_$NAME
  OUT=/tmp/o_$NAME IN=$IN ON=$ON bash .gpu/p13/probe.sh "$NAME" "$SD" "$RATES" "$DL" "$NP"
  cp /tmp/o_$NAME/*.tgz "$REAL/" 2>/dev/null
  date
done
ls -la "$REAL"
