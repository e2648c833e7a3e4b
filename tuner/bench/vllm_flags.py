"""`vllm bench serve`'s flag names on `python -m tuner.bench`, so a vLLM user's command line carries over.

Aliases of our own flags: --base-url (--url), --request-rate (--rate; `inf` sends every request at
once, as vLLM does), --num-prompts (--requests). Mapped onto a workload: --dataset-name
sharegpt|hf|custom with --dataset-path, random with --random-input-len/--random-output-len/
--random-range-ratio, and our profiles (static, dynamic, mixed) or trace/azure/mooncake with a path.
--backend openai-chat or --endpoint /v1/chat/completions pick the chat API. Results: --goodput
ttft:500 tpot:50 (vLLM's per-request SLOs for `request_goodput`), --percentile-metrics and
--metric-percentiles, --save-result with --result-dir/--result-filename, --save-detailed.
--ignore-eos is accepted and always on (every request runs to its output length).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.common.cli_types import count, folder_arg, path_arg
from tuner.common.errors import SpecError
from tuner.common.metric_keys import GOODPUT_METRICS, latency_key
from tuner.spec.sla import SLATerm

DATASETS = ("sharegpt", "hf", "custom", "random", "static", "dynamic", "mixed", "trace", "azure", "mooncake")


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("vllm bench serve flags (same names and meanings)")
    g.add_argument("--dataset-name", choices=DATASETS, help="where requests come from (with --dataset-path)")
    g.add_argument("--dataset-path", type=path_arg, help="ShareGPT .json/.jsonl, Hugging Face file or folder, or trace file")
    g.add_argument("--random-input-len", type=count(), default=1024)
    g.add_argument("--random-output-len", type=count(), default=128)
    g.add_argument("--random-range-ratio", type=float, default=0.0, help="lengths uniform in len*(1 +- ratio)")
    g.add_argument("--sharegpt-output-len", type=count(), default=None, help="fixed output length for dataset rows")
    g.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS",
                   help="per-request SLOs for request_goodput, e.g. ttft:500 tpot:50 e2el:8000")
    g.add_argument("--percentile-metrics", default="ttft,tpot,itl", help="metrics in the result JSON (+ e2el)")
    g.add_argument("--metric-percentiles", default="99", help="percentiles in the result JSON, e.g. 50,90,99")
    g.add_argument("--save-result", action="store_true", help="write vLLM's result JSON")
    g.add_argument("--save-detailed", action="store_true", help="add per-request lists to the result JSON")
    g.add_argument("--result-dir", type=folder_arg, default=None)
    g.add_argument("--result-filename", default=None)
    g.add_argument("--backend", default="vllm", help="openai-chat selects the chat API; others: completions")
    g.add_argument("--endpoint", default=None, help="/v1/completions or /v1/chat/completions")
    g.add_argument("--ignore-eos", action="store_true", help="always on here")
    g.add_argument("--label", default=None, help="label in the result JSON")


def apply(args: argparse.Namespace) -> None:
    """Fold vLLM-named flags into ours (SpecError on a combination that cannot work)."""
    if args.backend == "openai-chat" or args.endpoint == "/v1/chat/completions":
        args.api = "chat"
    elif args.endpoint not in (None, "/v1/completions"):
        raise SpecError(f"unsupported endpoint {args.endpoint!r}", "--endpoint", "use /v1/completions or /v1/chat/completions")
    if args.rate is not None and args.rate.strip().lower() == "inf":
        args.rate = None  # vLLM's default: every request at time 0 -> a closed loop holding them all
        args.concurrency = str(args.max_concurrency or args.requests or 200)
    args.percentile_metric_names = _metrics(args.percentile_metrics)
    args.percentiles = _percentiles(args.metric_percentiles)
    args.goodput_slos = goodput_slos(args.goodput) if args.goodput else None


def dataset_workload(args: argparse.Namespace) -> tuple[dict[str, Any], Path | None] | None:
    """The workload --dataset-name/--dataset-path describe (None: not given, use --workload)."""
    name, path = args.dataset_name, args.dataset_path
    if name is None:
        if path is not None:
            raise SpecError("--dataset-path without --dataset-name", "--dataset-name", "add e.g. --dataset-name sharegpt")
        return None
    if name in ("static", "dynamic", "mixed"):
        return {"profile": name}, None
    if name == "random":
        r, i, o = args.random_range_ratio, args.random_input_len, args.random_output_len
        if not 0 <= r < 1:
            raise SpecError(f"--random-range-ratio must be in [0, 1), got {r:g}", "--random-range-ratio", "give e.g. 0.1")
        return {"classes": [{"name": "random", "weight": 1, "input": _uniform(i, r), "output": _uniform(o, r)}]}, None
    if path is None:
        raise SpecError(f"--dataset-name {name} needs --dataset-path", "--dataset-path", "give the file or folder")
    p = Path(path)
    if name in ("trace", "azure", "mooncake"):
        return {"trace": {"path": str(p.resolve()), "format": "servetune" if name == "trace" else name}}, None
    data: dict[str, Any] = {"path": str(p.resolve())}
    if args.sharegpt_output_len:
        data["output_len"] = args.sharegpt_output_len
    return {"dataset": data}, None


def goodput_slos(items: list[str]) -> list[SLATerm]:
    """`ttft:500 tpot:50` -> per-request limits (a `max_` term per metric: each request must meet it)."""
    out = []
    for item in items:
        key, _, value = item.partition(":")
        key = key.strip().lower()
        if key not in GOODPUT_METRICS:
            raise SpecError(f"unknown goodput metric {key!r}", "--goodput", f"use {', '.join(GOODPUT_METRICS)} (vLLM's)")
        try:
            limit = float(value)
        except ValueError:
            raise SpecError(f"cannot read {item!r}", "--goodput", "write KEY:MILLISECONDS, e.g. ttft:500") from None
        if limit <= 0:
            raise SpecError(f"goodput SLO {item!r} must be > 0", "--goodput", "give a positive number of ms")
        out.append(SLATerm(latency_key("max", key), limit))
    return out


def result_paths(args: argparse.Namespace, mode: str, load: float, folder: Path | None) -> list[Path]:
    """Where the result JSON goes: result.json in the --output folder, and vLLM's --result-dir/--result-filename."""
    out = [folder / "result.json"] if folder else []
    if args.save_result or args.result_dir or args.result_filename:
        name = args.result_filename or f"servetune-{load:g}{'qps' if mode == 'rate' else 'conc'}-{Path(args.model).name}.json"
        out.append((args.result_dir or Path(".")) / name)
    return out


def _uniform(n: int, ratio: float) -> dict[str, Any] | int:
    if n < 1:
        raise SpecError(f"random lengths must be >= 1, got {n}", "--random-input-len/--random-output-len", "give >= 1")
    if ratio == 0:
        return n
    return {"dist": "uniform", "low": max(1, int(n * (1 - ratio))), "high": max(1, int(n * (1 + ratio)))}


def _metrics(text: str) -> list[str]:
    from tuner.common.metric_keys import LATENCY_METRICS

    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in LATENCY_METRICS]
    if bad or not names:
        raise SpecError(f"unknown metric(s) {bad or text!r}", "--percentile-metrics",
                        f"choose from {','.join(LATENCY_METRICS)}")
    return names


def _percentiles(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(not 0 < v <= 100 for v in values):
        raise SpecError(f"cannot read percentiles {text!r}", "--metric-percentiles", "give numbers in (0, 100], e.g. 50,99")
    return values
