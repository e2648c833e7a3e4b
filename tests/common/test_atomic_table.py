"""trials.parquet is rewritten atomically after every trial while other processes poll it (resume checks, deferred
tracking, the reliability tests): a reader must see one whole version, never half of two."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa

from tuner.common.atomic import read_table, write_table

SIZES = (1, 40, 300)


def test_a_reader_racing_atomic_rewrites_sees_whole_versions(tmp_path: Path) -> None:
    # pyarrow's reader of a path opened the file twice; on CI a rewrite between the two gave "Page was smaller
    # (29) than expected (38)" in tests/reliability/test_driver_killed.py. Same race here, thousands of times a second.
    path = tmp_path / "trials.parquet"
    tables = [pa.table({"n": list(range(n)), "s": ["x" * (n % 7)] * n}) for n in SIZES]
    write_table(path, tables[0])
    stop = threading.Event()

    def rewrite() -> None:
        i = 0
        while not stop.is_set():
            write_table(path, tables[i % len(tables)])
            i += 1

    writer = threading.Thread(target=rewrite, daemon=True)
    writer.start()
    seen: set[int] = set()
    errors: list[str] = []
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:
            try:
                table = read_table(path)
            except Exception as exc:  # noqa: BLE001 - any torn read is the failure
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            assert table.num_rows in SIZES
            assert table.column("n").to_pylist() == list(range(table.num_rows))
            seen.add(table.num_rows)
    finally:
        stop.set()
        writer.join(timeout=10)
    assert not errors, f"{len(errors)} torn reads, first: {errors[0]}"
    assert len(seen) >= 2, "the writer never replaced the file while the reader read it"
    assert not list(tmp_path.glob(".*")), "no temporary file left behind"
