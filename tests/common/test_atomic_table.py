"""trials.parquet is rewritten atomically after every trial while other processes poll it (resume checks, deferred
tracking, the reliability tests): a reader must see one whole version, never half of two."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa

from tuner.common.atomic import read_table, write_table

ROOT = Path(__file__).resolve().parents[2]
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


READ_AND_COUNT = """
import os, sys
from pathlib import Path
import pyarrow.parquet  # its import starts threads of its own: counted before the read
from tuner.common.atomic import read_table
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
rows = read_table(Path(sys.argv[1]), ["n"]).to_pylist()
print(before, threads(), len(rows))
"""


def test_reading_a_table_starts_no_native_threads(tmp_path: Path) -> None:
    # pyarrow's dataset reader left thread-pool threads that at exit sometimes aborted the process ("terminate
    # called without an active exception", exit -6): a refused `tuner.run` (folder in use) crashed on CI instead of
    # exiting 2. Reading on the calling thread starts none, so nothing is left to tear down.
    path = tmp_path / "t.parquet"
    write_table(path, pa.table({"n": list(range(50)), "s": ["x"] * 50}))
    proc = subprocess.run([sys.executable, "-c", READ_AND_COUNT, str(path)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, after, rows = map(int, proc.stdout.split())
    assert rows == 50 and after == before, f"{after - before} thread(s) started by the read"
