"""Exception tree. `SpecError` is bad input: the CLI maps it to exit status 2 before any engine starts."""

from __future__ import annotations

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

    def __init__(self, path: object, needed: int | None, free: int | None) -> None:
        self.path, self.needed, self.free = path, needed, free
        need = f"{needed:,} bytes needed" if needed is not None else "more space needed"
        have = f", {free:,} free" if free is not None else ""
        super().__init__(f"no space left to write {path} ({need}{have})")


def disk_full_in(exc: BaseException | None) -> DiskFullError | None:
    """The DiskFullError (or a bare ENOSPC/EDQUOT OSError, as one) behind an exception, through wrappers
    such as Ray Tune's TuneError."""
    import errno

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFullError):
            return exc
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return DiskFullError(exc.filename or "the output folder", None, None)
        exc = exc.__cause__ or exc.__context__
    return None
