"""Published LLM request traces, read into trace replay's columns (arrival_s, input_len, output_len).

- Azure LLM inference trace (Azure/AzurePublicDataset, 2023 and 2024): CSV with `TIMESTAMP`,
  `ContextTokens`, `GeneratedTokens`; timestamps like ``2023-11-16 18:15:46.6805900``.
- Mooncake trace (kvcache-ai/Mooncake): JSONL with `timestamp` (ms), `input_length`,
  `output_length` and `hash_ids` (512-token block hashes; not used: prompts here are synthetic).

Format is picked by `workload.trace.format`, or by content when `auto`.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from tuner.common.errors import SpecError

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
_FRACTION = re.compile(r"(\.\d{6})\d+")


def detect(path: Path) -> str:
    """'azure', 'mooncake' or 'servetune' from the file's suffix and first record."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "azure"
    if suffix in (".jsonl", ".json", ".ndjson"):
        with path.open(encoding="utf-8-sig") as f:
            first = next((line for line in utf8_lines(f, path) if line.strip()), "")
        try:
            row = json.loads(first)
        except (json.JSONDecodeError, RecursionError):
            return "servetune"  # its own reader reports the bad line
        if isinstance(row, dict) and all(k in row for k in MOONCAKE_KEYS):
            return "mooncake"
    return "servetune"


def read_azure(path: Path, where: str) -> dict[str, list]:
    cols: dict[str, list] = {"arrival_s": [], "input_len": [], "output_len": []}
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(utf8_lines(f, path))
        missing = [c for c in AZURE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SpecError(f"Azure trace {path} lacks column(s) {missing}", where,
                            f"give the Azure LLM inference trace CSV (columns {', '.join(AZURE_COLUMNS)})")
        t0: datetime | None = None
        for lineno, row in enumerate(reader, 2):
            try:
                t = datetime.fromisoformat(_FRACTION.sub(r"\1", row["TIMESTAMP"].strip()))
                t0 = t0 or t
                cols["arrival_s"].append((t - t0).total_seconds())
                cols["input_len"].append(int(row["ContextTokens"]))
                cols["output_len"].append(int(row["GeneratedTokens"]))
            except (ValueError, TypeError, AttributeError) as exc:
                raise SpecError(f"bad row in Azure trace: {exc}", f"{path}:{lineno}",
                                "TIMESTAMP as 'YYYY-MM-DD HH:MM:SS.ffffff', token counts as integers") from None
    return cols


def utf8_lines(f: TextIO, path: Path) -> Iterator[str]:
    """The lines of a text file opened as UTF-8; a byte that is not UTF-8 is bad input (decoding runs ahead of
    the lines, in blocks, so the line cannot be named)."""
    try:
        yield from f
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path} is not UTF-8 text ({exc.reason})", str(path), "save the file as UTF-8") from None


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; bad JSON is a located SpecError."""
    with path.open(encoding="utf-8-sig") as f:  # a BOM (Windows editors) is not part of the JSON
        for lineno, line in enumerate(utf8_lines(f, path), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply to read"
                raise SpecError(f"bad JSON in trace {path}: {why}", f"{path}:{lineno}",
                                "one JSON object per line") from None
            if not isinstance(row, dict):
                raise SpecError("trace line is not a JSON object", f"{path}:{lineno}", "one JSON object per line")
            yield lineno, row


def read_mooncake(path: Path, where: str) -> dict[str, list]:
    cols: dict[str, list] = {"arrival_s": [], "input_len": [], "output_len": []}
    for lineno, row in json_lines(path):
        try:
            cols["arrival_s"].append(float(row["timestamp"]) / 1000.0)
            cols["input_len"].append(int(row["input_length"]))
            cols["output_len"].append(int(row["output_length"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"bad Mooncake trace line: {exc!r}", f"{path}:{lineno}",
                            f"one JSON object per line with {', '.join(MOONCAKE_KEYS)} (timestamp in ms)") from None
    return cols
