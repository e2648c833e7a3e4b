"""`python -m tuner.bench`: benchmark any running OpenAI-compatible endpoint with servetune's load code.

    python -m tuner.bench --url http://127.0.0.1:8000 --model NAME --workload dynamic --rate 4 \
        --duration 60 --sla "p99_ttft_ms<=500,p99_e2el_ms<=8000" --output runs/bench1

`--workload` is a profile (static, dynamic, mixed) or a YAML file with a workload (classes or a
trace). `vllm bench serve`'s flag names work too (tuner.bench.vllm_flags): --base-url, --request-rate,
--num-prompts, --max-concurrency, --dataset-name/--dataset-path, --goodput, --percentile-metrics,
--save-result; a load run's `result.json` is vLLM's result JSON. `--rate` and `--concurrency` take one value or a comma list (a step test); with neither,
the static profile steps concurrency 8,16,32,64 and a trace replays at its own pace. `--capacity`
runs the trials' capacity search instead. Exit status: 0 done, 2 bad input, 1 every request failed.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from tuner.bench import vllm_flags
from tuner.bench.args import parser
from tuner.common.errors import SpecError
from tuner.load import bench_output as output
from tuner.load import ruler
from tuner.load.capacity import LoadPoint, find_capacity, point_violation
from tuner.load.metrics import summarize
from tuner.load.records_io import RecordWriter
from tuner.load.target import HttpTarget
from tuner.load.vllm_result import result_json
from tuner.load.workload import (
    DEFAULT_CONCURRENCY,
    abnormal_classes,
    generate,
    native_rate,
    validate_workload,
)
from tuner.spec.load import load_yaml, validate
from tuner.spec.sla import SLATerm, parse_sla
from tuner.spec.study import CapacitySettings
from tuner.spec.workload import Workload


def load_workload(arg: str, args: argparse.Namespace) -> tuple[Workload, Path | None]:
    path = Path(arg)
    data: dict[str, Any]
    given = vllm_flags.dataset_workload(args)
    if given is not None:
        data, base = given
        path = Path("--dataset-name")
    elif arg in ("static", "dynamic", "mixed"):
        data = {"profile": arg}
        base = None
    elif path.suffix.lower() in (".yaml", ".yml") or path.exists():
        raw = load_yaml(path)
        data = raw.get("workload", raw) if isinstance(raw, dict) else raw
        base = path.parent
    else:
        raise SpecError(f"unknown workload {arg!r}", "--workload", "use static, dynamic, mixed or a workload YAML file")
    if isinstance(data, dict):
        data = dict(data)
        if args.warmup is not None:
            data["warmup_requests"] = args.warmup
        if args.prompt is not None:
            data["prompt"] = args.prompt
        if args.arrivals or args.burstiness:
            arr = dict(data.get("arrivals") or {})
            arr.update({k: v for k, v in (("process", args.arrivals), ("burstiness", args.burstiness)) if v})
            data["arrivals"] = arr
    workload = validate(Workload, data, str(path) if base else "--workload")
    validate_workload(workload, base)
    return workload, base


def parse_loads(text: str | None, flag: str, integer: bool) -> list[float]:
    if text is None:
        return []
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecError(f"cannot read {text!r} as numbers", flag, "give a number or a comma list, e.g. 8,16,32") from None
    if not values or any(not math.isfinite(v) or v <= 0 or (integer and v != int(v)) for v in values):
        kind = "whole numbers > 0" if integer else "numbers > 0"
        raise SpecError(f"{flag} needs {kind}, got {text!r}", flag, f"give {kind}")
    return values


def plan(args: argparse.Namespace, workload: Workload, base: Path | None) -> tuple[str, list[float]]:
    """Which loads to run: ('rate' | 'concurrency', values)."""
    rates = parse_loads(args.rate, "--rate", False)
    conc = parse_loads(args.concurrency, "--concurrency", True)
    if rates:
        return "rate", rates
    if conc:
        return "concurrency", conc
    if workload.profile in DEFAULT_CONCURRENCY:
        return "concurrency", [float(c) for c in DEFAULT_CONCURRENCY[workload.profile]]
    trace_rate = native_rate(workload, base)
    if trace_rate is not None and math.isfinite(trace_rate):
        return "rate", [trace_rate]
    raise SpecError("no load given", "--rate/--concurrency", "give --rate R or --concurrency C (or --capacity)")


def run_load(target: HttpTarget, workload: Workload, base: Path | None, mode: str, load: float,
             args: argparse.Namespace, sla: Sequence[SLATerm], folder: Path | None) -> dict[str, float]:
    rate = load if mode == "rate" else None
    concurrency = int(load) if mode == "concurrency" else args.max_concurrency
    n = args.requests or 200
    send_until = None
    if args.duration:
        if mode == "rate":
            n = max(1, math.ceil(load * args.duration))
        else:
            n, send_until = max(1000, int(load * args.duration * 20)), args.duration
    requests = generate(workload, n=n, rate=rate, seed=args.seed, max_model_len=args.max_model_len, base_dir=base)
    writer = RecordWriter(folder / "records.parquet") if folder else None
    try:
        records = target.run(requests, concurrency=concurrency, sink=writer.write if writer else None,
                             send_until_s=send_until, progress=not args.no_progress)
    finally:
        if writer:
            writer.close()
    summary = summarize(records, sla=args.goodput_slos or sla, abnormal=abnormal_classes(workload, base))
    ruler.attach(summary, target.last_client, sla)
    if folder:
        output.write_json(folder / "summary.json", summary)
        output.write_json(folder / "probes.json", target.last_probes)
        output.write_json(folder / "run.json", {
            "url": args.url, "model": args.model, "workload": workload.model_dump(mode="json"), "mode": mode,
            "load": load, "requests": n, "seed": args.seed, "sla": [str(t) for t in sla], "api": args.api,
        })
    if paths := vllm_flags.result_paths(args, mode, load, folder):
        run = {"model_id": args.model, "tokenizer_id": args.tokenizer, "num_prompts": n,
               "request_rate": load if mode == "rate" else "inf", "burstiness": args.burstiness or 1.0,
               "max_concurrency": concurrency, "label": args.label}
        result = result_json(records, summary, run=run, metrics=args.percentile_metric_names,
                             percentiles=args.percentiles, goodput=bool(args.goodput_slos or sla),
                             detailed=args.save_detailed)
        for where in paths:
            output.write_json(where, result)
    return summary


def verdict(sla: Sequence[SLATerm], summary: dict[str, float]) -> str:
    if not sla:
        return ""
    v = point_violation(sla, summary)
    return "[green]met[/]" if v <= 0 else f"[red]missed ({v:+.0%})[/]"


def metric_names(prefix: str) -> dict[str, tuple[str, ...]]:
    """The /metrics names of the registered engine that uses `prefix` (none known: no probes)."""
    from tuner.engines import engine_class, names

    for name in names():
        cls = engine_class(name)
        if cls.metrics_prefix == prefix and cls.metric_names:
            return dict(cls.metric_names)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        vllm_flags.apply(args)
        sla = parse_sla(args.sla, "--sla") if args.sla else []
        workload, base = load_workload(args.workload, args)
        target = HttpTarget(args.url, args.model, api=args.api, prompt_mode=workload.prompt,
                            tokenizer=args.tokenizer, timeout_s=args.timeout, metrics_prefix=args.metrics_prefix,
                            metric_names=metric_names(args.metrics_prefix), processes=args.client_processes,
                            time_scale=args.time_scale)
        if args.client_processes < 1:
            raise SpecError(f"--client-processes must be >= 1, got {args.client_processes}", "--client-processes",
                            "give 1 (default) or more processes")
        if args.capacity:
            return capacity(args, target, workload, base, sla, console)
        mode, loads = plan(args, workload, base)
    except SpecError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    rows = []
    summaries: list[dict[str, Any]] = []
    for load in loads:
        folder = None
        if args.output:
            folder = args.output if len(loads) == 1 else args.output / f"{mode}_{load:g}"
        summary = run_load(target, workload, base, mode, load, args, sla, folder)
        summaries.append({"mode": mode, "load": load, **summary})
        rows.append((f"{mode} {load:g}", summary, verdict(sla, summary)))
        console.print(f"{mode} {load:g}: {summary['completed']:.0f} ok, {summary['failed']:.0f} failed")
        if warn := ruler.warning(summary):
            console.print(f"[yellow]warning:[/] {mode} {load:g}: {warn}")
    output.show(console, rows, f"{args.model} @ {args.url} -- {args.workload} (ms)")
    if len(loads) == 1 and len(output.class_rows(summaries[0])) > 1:
        output.show(console, output.class_rows(summaries[0]), "per class (abnormal excluded from the totals)")
    if args.output and len(loads) > 1:
        output.write_json(args.output / "summary.json", {"points": summaries})
    return 1 if all(s["completed"] == 0 for s in summaries) else 0


def capacity(args: argparse.Namespace, target: HttpTarget, workload: Workload, base: Path | None,
             sla: Sequence[SLATerm], console: Console) -> int:
    if not sla:
        raise SpecError("--capacity needs an SLA", "--sla", 'give e.g. --sla "p99_ttft_ms<=500"')
    options: dict[str, Any] = {
        "mode": args.mode, "low": args.low, "high": args.high, "tolerance": args.tolerance,
        "max_points": args.max_points, "duration_s": args.duration, "request_timeout_s": args.timeout}
    if args.duration is None or args.requests:  # a point is sized by one of them (both given: refused)
        options["requests_per_point"] = args.requests or 200
    settings = validate(CapacitySettings, options, "capacity options")

    def show(p: LoadPoint) -> None:
        state = "feasible" if p.feasible else f"violation {p.violation:+.2f}"
        console.print(f"{args.mode} {p.load:g}: {state}" + (f" (stopped: {p.stopped_early})" if p.stopped_early else ""))
        if warn := ruler.warning(p.summary):
            console.print(f"[yellow]warning:[/] {args.mode} {p.load:g}: {warn}")

    res = find_capacity(target, workload, sla, settings, seed=args.seed, max_model_len=args.max_model_len,
                        base_dir=base, on_point=show)
    rows = [(f"{args.mode} {p.load:g}", p.summary, verdict(sla, p.summary) if not p.stopped_early else "[red]stopped[/]")
            for p in sorted(res.points, key=lambda p: p.load)]
    output.show(console, rows, f"capacity search: {args.model} -- {args.workload} (ms)")
    console.print(f"capacity: {res.capacity if res.capacity is not None else 'none (SLA missed at the lowest load)'}")
    if args.output:
        output.write_json(args.output / "summary.json", {
            "capacity": res.capacity, "mode": args.mode, "best": res.best.summary if res.best else None,
            "points": [{"load": p.load, "feasible": p.feasible, "violation": p.violation,
                        "stopped_early": p.stopped_early, **p.summary} for p in res.points]})
        with RecordWriter(args.output / "records.parquet") as w:
            for r in res.records:
                w.write(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
