"""Exception tree. `SpecError` is bad input: the CLI maps it to exit status 2 before any engine starts."""

from __future__ import annotations

from pathlib import Path

from tuner.trial.outcome import TrialOutcome  # a leaf module (stdlib only), below every layer


class ServetuneError(Exception):
    """Base of every error servetune raises on purpose."""


class SpecError(ServetuneError):
    """Bad user input: says what is wrong, where, and how to fix it. Exit status 2."""

    MAX = 2000  # characters of `what`: a message echoing a huge input stays readable (and small)

    def __init__(self, what: str, where: str = "", fix: str = "") -> None:
        if len(what) > self.MAX:
            what = what[: self.MAX] + f"... ({len(what) - self.MAX} more characters)"
        where, fix = where[: self.MAX], fix[: self.MAX]
        self.what, self.where, self.fix = what, where, fix
        parts = [f"{where}: {what}" if where else what]
        if fix:
            parts.append(f"fix: {fix}")
        super().__init__(" | ".join(parts))


class EngineStartError(ServetuneError):
    """The engine did not become ready, and what that means (start_failed, oom, timeout...)."""

    def __init__(self, outcome: TrialOutcome, reason: str) -> None:
        self.outcome, self.reason = TrialOutcome(outcome), reason
        super().__init__(f"{self.outcome.value}: {reason}")


class DiskFullError(ServetuneError):
    """The output folder's file system is full: which file, how many bytes it needed, how many were free."""

    def __init__(self, path: object, needed: int | None, free: int | None, at_least: bool = False) -> None:
        self.path, self.needed, self.free = path, needed, free
        need = f"{'at least ' if at_least else ''}{needed:,} bytes needed" if needed is not None else "more space needed"
        have = f", {free:,} free" if free is not None else ""
        super().__init__(f"no space left to write {path} ({need}{have})")


_SQLITE_PAGE = 4096  # SQLite's default page size


def disk_full_in(exc: BaseException | None, folder: Path | None = None) -> DiskFullError | None:
    """The DiskFullError (or a bare ENOSPC/EDQUOT OSError, or SQLite's "database or disk is full" from the
    Optuna or MLflow store in `folder`, as one) behind an exception, through wrappers such as Ray Tune's
    TuneError. SQLite does not say how much it wanted: one page (4 KiB by default) is the least a write needs."""
    import errno
    import shutil
    import sqlite3

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFullError):
            return exc
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return DiskFullError(exc.filename or "the output folder", None, None)
        if isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc):
            where = f"a SQLite store in {folder} (optuna.db or mlflow.db)" if folder else "a SQLite store"
            free = shutil.disk_usage(folder).free if folder is not None and folder.exists() else None
            return DiskFullError(where, _SQLITE_PAGE, free, at_least=True)
        exc = exc.__cause__ or exc.__context__
    return None
