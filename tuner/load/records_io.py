"""Per-request records to Parquet as they complete: batches of rows, so memory stays bounded."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tuner.load.records import RequestRecord

SCHEMA = pa.schema([
    ("id", pa.int64()), ("cls", pa.string()), ("input_len", pa.int64()), ("output_len", pa.int64()),
    ("sent_s", pa.float64()), ("first_token_s", pa.float64()), ("done_s", pa.float64()),
    ("output_tokens", pa.int64()), ("error", pa.string()), ("preemptions", pa.int64()), ("warmup", pa.bool_()),
    ("ttft_ms", pa.float64()), ("tpot_ms", pa.float64()), ("e2el_ms", pa.float64()),
    ("token_times", pa.list_(pa.float64())),
])


class RecordWriter:
    """Stream records to one Parquet file, a row group per `batch_size` records.

    `extra` names constant-per-write columns (e.g. {"load": pa.float64()}) given to `write(**values)`.
    """

    def __init__(self, path: Path, *, batch_size: int = 2048, extra: dict[str, pa.DataType] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.extra = dict(extra or {})
        self.schema = SCHEMA
        for name, typ in self.extra.items():
            self.schema = self.schema.append(pa.field(name, typ))
        self.batch_size = batch_size
        self._rows: list[RequestRecord] = []
        self._extras: list[dict[str, Any]] = []
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(self.path, self.schema)
        self.written = 0

    def write(self, record: RequestRecord, **extra: Any) -> None:
        self._rows.append(record)
        self._extras.append(extra)
        if len(self._rows) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if not self._rows or self._writer is None:
            return
        rows, extras = self._rows, self._extras
        cols: dict[str, list[Any]] = {
            "id": [r.id for r in rows], "cls": [r.cls for r in rows], "input_len": [r.input_len for r in rows],
            "output_len": [r.output_len for r in rows], "sent_s": [r.sent_s for r in rows],
            "first_token_s": [r.first_token_s for r in rows], "done_s": [r.done_s for r in rows],
            "output_tokens": [r.output_tokens for r in rows], "error": [r.error for r in rows],
            "preemptions": [r.preemptions for r in rows], "warmup": [r.warmup for r in rows],
            "ttft_ms": [_ms(r.ttft_s) for r in rows], "tpot_ms": [_ms(r.tpot_s) for r in rows],
            "e2el_ms": [_ms(r.e2e_s) for r in rows], "token_times": [r.token_times for r in rows],
        }
        for name in self.extra:
            cols[name] = [e.get(name) for e in extras]
        self._writer.write_table(pa.Table.from_pydict(cols, schema=self.schema))
        self.written += len(rows)
        self._rows, self._extras = [], []

    def close(self) -> None:
        if self._writer is not None:
            self.flush()
            self._writer.close()
            self._writer = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_records(path: Path) -> pa.Table:
    return pq.read_table(path)


def to_records(table: pa.Table) -> list[RequestRecord]:
    """Rebuild RequestRecords from a table written by RecordWriter (e.g. to summarize again)."""
    rows = table.select([f.name for f in SCHEMA if f.name not in ("ttft_ms", "tpot_ms", "e2el_ms")]).to_pylist()
    return [RequestRecord(**{k: (v if v is not None or k != "token_times" else []) for k, v in row.items()})
            for row in rows]


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1e3
