"""What a benchmark run leaves behind and shows: summary.json, probes.json, run.json, a rich table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tuner.common.atomic import write_json as atomic_write_json

COLUMNS = [  # (header, summary key, format)
    ("ok/failed", "", ""),
    ("req/s", "request_throughput", "{:.2f}"),
    ("out tok/s", "output_throughput", "{:.0f}"),
    ("goodput/s", "request_goodput", "{:.2f}"),
    ("TTFT p50", "p50_ttft_ms", "{:.1f}"),
    ("TTFT p99", "p99_ttft_ms", "{:.1f}"),
    ("TPOT p50", "p50_tpot_ms", "{:.2f}"),
    ("TPOT p99", "p99_tpot_ms", "{:.2f}"),
    ("ITL p99", "p99_itl_ms", "{:.2f}"),
    ("E2E p99", "p99_e2el_ms", "{:.0f}"),
]


def write_json(path: Path, data: Any) -> None:
    """Atomic and valid JSON (NaN as null): tuner.common.atomic's writer, keys sorted."""
    atomic_write_json(path, data, sort_keys=True)


def _fmt(summary: Mapping[str, float], key: str, fmt: str) -> str:
    if not key:
        return f"{summary.get('completed', 0):.0f}/{summary.get('failed', 0):.0f}"
    v = summary.get(key)
    return "-" if v is None or not math.isfinite(v) else fmt.format(v)


def table(rows: Sequence[tuple[str, Mapping[str, float], str]], title: str) -> Table:
    """One row per (label, summary, verdict); times in ms."""
    t = Table(title=title, title_justify="left")
    t.add_column("load")
    for header, _, _ in COLUMNS:
        t.add_column(header, justify="right")
    t.add_column("SLA")
    for label, summary, verdict in rows:
        t.add_row(label, *(_fmt(summary, k, f) for _, k, f in COLUMNS), verdict)
    return t


def class_rows(summary: Mapping[str, float]) -> list[tuple[str, dict[str, float], str]]:
    """Per-class sub-summaries (`class.<name>.*`) as table rows."""
    names = sorted({k.split(".")[1] for k in summary if k.startswith("class.")})
    rows = []
    for name in names:
        prefix = f"class.{name}."
        rows.append((name, {k[len(prefix):]: v for k, v in summary.items() if k.startswith(prefix)}, ""))
    return rows


def show(console: Console, rows: Sequence[tuple[str, Mapping[str, float], str]], title: str) -> None:
    console.print(table(rows, title))
