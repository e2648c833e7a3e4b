#!/bin/bash
# DEVICE: run studies one after another in a process session of their own (setsid), so that they
# outlive the command that started them: a command lasts at most 10 minutes and kills what it leaves
# running, but a new session runs on while the host is held. Later commands only wait and bring the
# results back (scripts/h200/collect.sh), so no trial is cut short at a command's end and no GPU waits
# for the next command. Each study's files go to /tmp/res/NAME.
# usage: bash scripts/h200/run_detached.sh SECONDS EXECUTOR STUDY TRIALS ENQUEUE_JSON [STUDY TRIALS ENQUEUE_JSON ...]
#   SECONDS: from now until every study must be done (each starts no trial it cannot finish).
set -u
END=$(( $(date +%s) + $1 )); EXECUTOR=$2; shift 2
mkdir -p /tmp/res
export END EXECUTOR
setsid bash -c '
  while [ $# -ge 3 ]; do
    name=$(basename "$1" .yaml); left=$(( END - $(date +%s) ))
    echo "$(date +%T) $name: $left s left" >> /tmp/res/chain.log
    [ $left -gt 60 ] && OUT=/tmp/res/$name bash scripts/h200/run_study.sh "$1" "$left" "$2" "$3" "$EXECUTOR" >> /tmp/res/chain.log 2>&1
    shift 3
  done
  echo "$(date +%T) done" >> /tmp/res/chain.log; touch /tmp/res/.done
' chain "$@" < /dev/null > /dev/null 2>&1 &
echo "started the chain (pid $!), ends by $(date -d @$END +%T)"
