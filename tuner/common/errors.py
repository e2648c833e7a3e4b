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

    def __init__(self, outcome: TrialOutcome | str, reason: str) -> None:
        self.outcome, self.reason = TrialOutcome(outcome), reason
        super().__init__(f"{self.outcome.value}: {reason}")
