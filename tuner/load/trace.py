"""Trace replay: a Parquet or JSONL file of (arrival_s, input_len, output_len[, cls]) rows, or a published
trace (Azure LLM inference CSV, Mooncake JSONL) read by tuner.load.trace_formats."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.common.errors import SpecError
from tuner.load import trace_formats

COLUMNS = ("arrival_s", "input_len", "output_len")


@dataclass(frozen=True)
class TraceRows:
    arrival_s: np.ndarray  # float seconds, sorted, starting at 0
    input_len: np.ndarray
    output_len: np.ndarray
    cls: list[str]

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def rate(self) -> float:
        """Mean arrival rate of the trace (req/s); inf when every row arrives at once."""
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0
        return float("inf") if span <= 0 else (len(self) - 1) / span


def resolve(path: Path, base_dir: Path | None) -> Path:
    return path if path.is_absolute() or base_dir is None else base_dir / path


def read_trace(path: Path, where: str = "workload.trace.path", fmt: str = "auto") -> TraceRows:
    """Read and check a trace (servetune's, Azure CSV or Mooncake JSONL); every problem is a SpecError naming the file."""
    if not path.exists():
        raise SpecError(f"trace file not found: {path}", where, "check the path (relative paths are from the study file)")
    suffix = path.suffix.lower()
    fmt = trace_formats.detect(path) if fmt == "auto" else fmt
    if fmt == "azure":
        cols = trace_formats.read_azure(path, where)
    elif fmt == "mooncake":
        cols = trace_formats.read_mooncake(path, where)
    elif suffix == ".parquet":
        cols = _read_parquet(path, where)
    elif suffix in (".jsonl", ".json", ".ndjson"):
        cols = _read_jsonl(path, where)
    else:
        raise SpecError(f"unknown trace format {suffix!r}", where, "give a .parquet or .jsonl file, an Azure trace .csv or a Mooncake .jsonl")
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        raise SpecError(f"trace {path} lacks column(s) {missing}", where, f"give columns {list(COLUMNS)} (+ optional cls)")
    n = len(cols["arrival_s"])
    if n == 0:
        raise SpecError(f"trace {path} has no rows", where, "give at least one request")
    for name in COLUMNS:
        if any(isinstance(v, bool) for v in cols[name]):
            raise SpecError(f"trace {path}: {name} has true/false values", where, "use numbers for times and lengths")
    if "cls" in cols and any(c is None or not str(c).strip() for c in cols["cls"]):
        raise SpecError(f"trace {path}: cls is missing or empty on some rows", where,
                        "give every row a class name, or drop the cls column")
    try:
        arrival = np.asarray(cols["arrival_s"], dtype=float)
        inp = np.asarray(cols["input_len"], dtype=float)
        out = np.asarray(cols["output_len"], dtype=float)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"trace {path} has non-numeric values: {exc}", where, "use numbers for times and lengths") from None
    for name, arr in (("arrival_s", arrival), ("input_len", inp), ("output_len", out)):
        if arr.ndim != 1:  # cells holding lists read as a 2-D array, which fails only when requests are built
            raise SpecError(f"trace {path}: {name} holds lists, not one number per row", where,
                            "use one number per row for times and lengths")
        if not np.all(np.isfinite(arr)):
            raise SpecError(f"trace {path}: {name} has missing or infinite values", where, "fill every row")
    if np.any(arrival < 0) or np.any(inp < 1) or np.any(out < 1):
        raise SpecError(f"trace {path}: times must be >= 0 and lengths >= 1", where, "fix the offending rows")
    if np.any(inp > MAX_TOKENS) or np.any(out > MAX_TOKENS):
        raise SpecError(f"trace {path}: a length is above {MAX_TOKENS:,} tokens (no model reads that much)", where,
                        "fix the offending rows (lengths are tokens, not characters or bytes)")
    if arrival.max() - arrival.min() > MAX_SPAN_S:
        raise SpecError(f"trace {path}: its requests span {arrival.max() - arrival.min():.3g} s, more than 30 days",
                        where, "give arrival_s in seconds from the trace's start (not milliseconds or epoch "
                        "nanoseconds), or cut the trace")
    order = np.argsort(arrival, kind="stable")
    classes = [str(c) for c in cols.get("cls", ["trace"] * n)]
    return TraceRows(
        arrival_s=arrival[order] - arrival[order][0],
        input_len=np.rint(inp[order]).astype(np.int64),
        output_len=np.rint(out[order]).astype(np.int64),
        cls=[classes[i] for i in order],
    )


MAX_TOKENS = 10_000_000  # longer than any model's context: a unit slip or a corrupt row
MAX_SPAN_S = 30 * 86400.0  # a benchmark replays minutes to hours; beyond a month the unit is wrong


def _read_parquet(path: Path, where: str) -> dict[str, list]:
    import pyarrow as pa

    from tuner.common.atomic import read_table

    try:
        return read_table(path).to_pydict()
    except (pa.ArrowException, OSError) as exc:
        raise SpecError(f"cannot read Parquet trace {path}: {exc}", where, "give a valid Parquet file") from None


def _read_jsonl(path: Path, where: str) -> dict[str, list]:
    cols: dict[str, list] = {}
    rows = 0
    for _, row in trace_formats.json_lines(path):
        for key in set(cols) | set(row):
            cols.setdefault(key, [None] * rows).append(row.get(key))
        rows += 1
    if any(v is None for c in COLUMNS for v in cols.get(c, [])):
        raise SpecError(f"trace {path}: some rows lack {list(COLUMNS)}", where, "give every column on every line")
    return cols
