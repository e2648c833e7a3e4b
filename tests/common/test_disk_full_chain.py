"""A full disk is recognised behind any wrapper: SQLite's own "database or disk is full" (the Optuna and
MLflow stores live in the output folder) gets the one disk-full message, not a chain of tracebacks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tuner.common.errors import DiskFullError, disk_full_in


def _sqlite_full(tmp_path: Path) -> sqlite3.OperationalError:
    db = sqlite3.connect(tmp_path / "full.db")
    db.execute("PRAGMA max_page_count = 2")  # a real SQLITE_FULL, as on a full file system
    try:
        db.execute("CREATE TABLE t (x BLOB)")
        for _ in range(100):
            db.execute("INSERT INTO t VALUES (?)", (b"x" * 4096,))
        db.commit()
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        db.close()
    raise AssertionError("SQLite did not fill up")


def test_sqlite_full_behind_wrappers_is_a_disk_full(tmp_path: Path) -> None:
    full = _sqlite_full(tmp_path)
    try:
        try:
            raise full
        except sqlite3.OperationalError as exc:
            raise RuntimeError("An exception is raised during the commit.") from exc  # as Optuna's storage does
    except RuntimeError as wrapped:
        found = disk_full_in(wrapped)
    assert isinstance(found, DiskFullError) and "SQLite store" in str(found)


def test_other_sqlite_errors_are_not_a_disk_full(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "x.db")
    try:
        db.execute("SELECT * FROM missing")
    except sqlite3.OperationalError as exc:
        assert disk_full_in(exc) is None
    finally:
        db.close()
