#!/usr/bin/env python3
"""DEVICE (servetune's copy of the GPU recipe's bench_rates.py, with knobs for other engines and per-request
output: SERVED, RESET_PATH, DETAILED, BACKEND; see env below). Runs `vllm bench serve` at several Poisson rates, back to back, against ONE running server,
inside ONE Python process (saves the ~15-20 s of vllm imports that each `vllm bench serve` CLI call pays).

usage: bench_rates.py NAME OUTDIR MODEL_DIR RATE [RATE...]
env:   SERVED (qwen3-8b-dummy: the served model name) RESET_PATH (/reset_prefix_cache; SGLang: /flush_cache)
       DETAILED (1: --save-detailed, per-request ttfts/itls/lengths/start times) BACKEND (vllm)
       PORT (8000) NP (200) IN (2048) ON (512) SEED (0) WARMUPS (8) RESET_CACHE (1) DEADLINE (epoch s)

Per rate it writes OUTDIR/bench_NAME_r<RATE>.json (vLLM's own --save-result file) and records, from the
server's /metrics, the prefix-cache queries/hits and preemptions that happened during that rate's run.
Why RESET_CACHE: `--dataset-name random --seed 0` gives the SAME 200 prompts every run (token ids are
(offset_i + i + arange(len)) % vocab with offsets drawn from default_rng(seed)); the KV cache (~800k tokens)
holds one whole 200 x 2560-token run, so without a reset rate k+1 would hit the cache left by rate k.
With RESET_CACHE=1 (server started with VLLM_SERVER_DEV_MODE=1) it POSTs /reset_prefix_cache before each
rate. If that fails it falls back to seed SEED+index for that rate, and says so.
Exit: 0 all rates ran, 1 some rate failed or was skipped, 3 could not import vllm's bench (caller falls back to CLI).
"""
import json
import os
import re
import sys
import time
import traceback
import urllib.request

NAME, OUTDIR, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]
RATES = sys.argv[4:]
PORT = int(os.environ.get("PORT", "8000"))
NP = int(os.environ.get("NP", "200"))
IN = os.environ.get("IN", "2048")
ON = os.environ.get("ON", "512")
SEED = int(os.environ.get("SEED", "0"))
WARMUPS = os.environ.get("WARMUPS", "8")
RESET = os.environ.get("RESET_CACHE", "1") == "1"
DEADLINE = float(os.environ.get("DEADLINE", time.time() + 540))
BASE = f"http://127.0.0.1:{PORT}"
SERVED = os.environ.get("SERVED", "qwen3-8b-dummy")
RESET_PATH = os.environ.get("RESET_PATH", "/reset_prefix_cache")
DETAILED = os.environ.get("DETAILED", "1") == "1"
BACKEND = os.environ.get("BACKEND", "vllm")
T0 = time.time()


def log(*a):
    print(f"[bench_rates +{time.time() - T0:6.1f}s]", *a, flush=True)


def metrics():
    """Sum of each counter over its label sets, from the Prometheus text at /metrics."""
    want = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:num_preemptions_total",
            "vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total")
    out = {k: 0.0 for k in want}
    try:
        with urllib.request.urlopen(BASE + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)", line)
                if m and m.group(1) in out:
                    out[m.group(1)] += float(m.group(3))
    except Exception as e:  # noqa: BLE001 - a metrics read must never stop the sweep
        out["error"] = repr(e)
    return out


def reset_cache():
    try:
        req = urllib.request.Request(BASE + RESET_PATH, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read().decode()
            ok = r.status == 200 and json.loads(body or "{}").get("success", True) is not False
            return ok, f"HTTP {r.status} {body.strip()}"
    except Exception as e:  # noqa: BLE001 - any failed reset falls back to another seed
        return False, repr(e)


try:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except Exception:  # noqa: BLE001 - exit 3 tells the caller to fall back to the CLI
    traceback.print_exc()
    sys.exit(3)

log(f"imports done; rates={RATES} NP={NP} IN={IN} ON={ON} seed={SEED} reset_cache={RESET}")
records, rc = [], 0
rec_path = os.path.join(OUTDIR, f"rates_{NAME}.json")
for idx, rate in enumerate(RATES):
    need = NP / float(rate) + 30
    left = DEADLINE - time.time()
    if need > left:
        log(f"SKIP rate {rate}: needs ~{need:.0f} s, {left:.0f} s left before the deadline")
        records.append({"rate": rate, "skipped": True, "need_s": need, "left_s": left})
        rc = 1
        continue
    seed = SEED
    reset_ok, reset_msg = (None, "not asked")
    if RESET:
        reset_ok, reset_msg = reset_cache()
        if not reset_ok:
            seed = SEED + idx
            log(f"prefix-cache reset FAILED ({reset_msg}); using seed {seed} for rate {rate} instead")
    log(f"rate {rate}: reset={reset_ok} ({reset_msg}) seed={seed}")
    fname = f"bench_{NAME}_r{rate}.json"
    argv = ["--backend", BACKEND, "--model", SERVED, "--tokenizer", MODEL,
            "--host", "127.0.0.1", "--port", str(PORT),
            "--dataset-name", "random", "--random-input-len", IN, "--random-output-len", ON,
            "--num-prompts", str(NP), "--request-rate", str(rate), "--burstiness", "1",
            "--ignore-eos", "--seed", str(seed), "--num-warmups", WARMUPS,
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--save-result", "--result-dir", OUTDIR, "--result-filename", fname, "--disable-tqdm"]
    if DETAILED:
        argv.append("--save-detailed")
    m0 = metrics()
    t_start = time.time()
    rec = {"rate": rate, "seed": seed, "reset_ok": reset_ok, "reset_msg": reset_msg, "argv": argv}
    try:
        parser = FlexibleArgumentParser()
        add_cli_args(parser)
        args = parser.parse_args(argv)
        res = bench_main(args)
        rec.update(ok=True, completed=res.get("completed"), failed=res.get("failed"),
                   request_throughput=res.get("request_throughput"),
                   p99_ttft_ms=res.get("p99_ttft_ms"), p99_tpot_ms=res.get("p99_tpot_ms"))
    except Exception as e:  # noqa: BLE001 - one failed rate must not lose the others
        traceback.print_exc()
        rec.update(ok=False, error=repr(e))
        rc = 1
    m1 = metrics()
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m0 if k != "error"}
    q = d.get("vllm:prefix_cache_queries_total", 0)
    h = d.get("vllm:prefix_cache_hits_total", 0)
    rec.update(wall_s=round(time.time() - t_start, 1), metrics_delta=d,
               prefix_hit_pct=round(100 * h / q, 2) if q else None,
               metrics_errors=[x.get("error") for x in (m0, m1) if "error" in x])
    records.append(rec)
    log(f"rate {rate} done in {rec['wall_s']} s: ok={rec.get('ok')} req/s={rec.get('request_throughput')} "
        f"p99 TTFT={rec.get('p99_ttft_ms')} p99 TPOT={rec.get('p99_tpot_ms')} "
        f"prefix hit {rec['prefix_hit_pct']}% preemptions={d.get('vllm:num_preemptions_total')}")
    json.dump(records, open(rec_path, "w"), indent=1)
json.dump(records, open(rec_path, "w"), indent=1)
sys.exit(rc)
