#!/bin/bash
# DEVICE, sourced (not run) by promote_deploy.sh and failover_demo.sh: the environment and the Ray head
# that servetune's promotion CLIs use on the H200 host, in one place. Leaves the shell in /tmp/st (the
# study's snapshot from tuner_run.sh: its relative model path .gpu/model resolves there, for the CLI and
# Ray's workers alike).
cd /tmp/st || return 2
export PYTHONPATH=/tmp/st:${SITE:-/tmp/servetune-site} RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export RAY_DASHBOARD_ADDRESS=http://127.0.0.1:8265
# tuner.run's ray.init leaves ~/.ray/auth_token; `ray start --head` then turns token auth on, and a client
# without RAY_AUTH_MODE=token is refused (seen on the H200, round 3)
if [ -f "$HOME/.ray/auth_token" ]; then export RAY_AUTH_MODE=token; fi

ray_head_start() {  # dashboard REST on 127.0.0.1:8265; Serve HTTP on 127.0.0.1:8000 once something deploys
  echo "== $(date -u +%T) ray start"
  python3 -m ray.scripts.scripts start --head --dashboard-host 127.0.0.1 --disable-usage-stats
}
ray_head_stop() { python3 -m ray.scripts.scripts stop --force; }
state_field() {  # state_field FILE KEY: one value of a study's state.json (file and key are data, not code)
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}
keep_replica_logs() {  # keep_replica_logs DIR: the Serve replicas' engine logs (serve_apps.engine_process)
  mkdir -p "$1"
  for f in /tmp/servetune-*-replica-*/engine.log; do
    [ -f "$f" ] && cp "$f" "$1/$(basename "$(dirname "$f")").log"
  done
  return 0
}
