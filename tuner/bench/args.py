"""The command line of `python -m tuner.bench` (light imports: `--help` answers before the load code loads)."""

from __future__ import annotations

import argparse

from tuner.bench import vllm_flags
from tuner.common.cli_types import SECONDS, SEED, count, folder_arg, http_url, number

DESCRIPTION = "Benchmark any running OpenAI-compatible endpoint with servetune's load code."


def parser() -> argparse.ArgumentParser:
    from tuner.common.prog import prog

    p = argparse.ArgumentParser(prog=prog("bench"), description=DESCRIPTION)
    p.add_argument("--url", "--base-url", dest="url", type=http_url, required=True,
                   help="server root, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="model name the server serves")
    p.add_argument("--workload", default="dynamic", help="static | dynamic | mixed | path to a workload YAML")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--rate", "--request-rate", dest="rate",
                      help="req/s of the arrival process; a comma list steps through loads; inf: all at once")
    load.add_argument("--concurrency", help="closed-loop concurrency; a comma list steps through loads")
    p.add_argument("--max-concurrency", type=count(), default=None, help="cap in-flight requests of a rate run")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--duration", type=SECONDS, help="seconds of sending per load")
    size.add_argument("--requests", "--num-prompts", dest="requests", type=count(),
                      help="measured requests per load (default 200)")
    p.add_argument("--sla", default="", help='e.g. "p99_ttft_ms<=500,p99_e2el_ms<=8000"')
    p.add_argument("--output", type=folder_arg, help="folder for records.parquet, summary.json, probes.json")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--api", choices=["completions", "chat"], default="completions")
    p.add_argument("--prompt", choices=["words", "token_ids", "tokenizer"], default=None,
                   help="how prompts of exact length are made (default: the workload's, else words)")
    p.add_argument("--tokenizer", help="tokenizer for --prompt tokenizer")
    p.add_argument("--warmup", type=count(0, 1_000_000), default=None, help="warm-up requests (default: the workload's, 8)")
    p.add_argument("--arrivals", choices=["poisson", "gamma", "constant"], default=None)
    p.add_argument("--burstiness", type=number(0.0, 1000.0), default=None, help="gamma shape (1 = Poisson, < 1 burstier)")
    p.add_argument("--max-model-len", type=count(), default=None, help="cut inputs so input + output fits")
    p.add_argument("--timeout", type=SECONDS, default=300.0, help="per-request timeout, seconds")
    p.add_argument("--metrics-prefix", default="vllm:", help="vllm: or sglang: (/metrics names)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--time-scale", type=number(0.0, 1000.0), default=1.0, metavar="S",
                   help="the server runs S times faster than the wall clock (servetune's simulator server, "
                        "python -m tuner.sim.server --time-scale S): loads, durations, timeouts and every figure are "
                        "read on its clock")
    p.add_argument("--client-processes", type=count(1, 256), default=1,
                   help="split each load over N client processes when one cannot read every stream in time "
                        "(see client_error_ms); not with --capacity, whose early stop needs every stream in one")
    cap = p.add_argument_group("capacity search (--capacity)")
    cap.add_argument("--capacity", action="store_true", help="find the highest load meeting --sla")
    cap.add_argument("--mode", choices=["rate", "concurrency"], default="rate")
    cap.add_argument("--low", type=number(), default=0.5)
    cap.add_argument("--high", type=number(), default=64.0)
    cap.add_argument("--tolerance", type=number(0.0, 1.0, high_open=True), default=0.05)
    cap.add_argument("--max-points", type=count(1, 1000), default=8)
    vllm_flags.add_flags(p)
    return p
