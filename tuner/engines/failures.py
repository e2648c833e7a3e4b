"""Failure classification: exit status + log tail -> (TrialOutcome, one-line reason quoting the engine).

Engines print their own words for the same few failures (out of memory, bad config, port taken).
A table of patterns maps them to outcomes; the reason is the engine's own line, cleaned of log
prefixes, so MLflow shows what the engine said rather than a paraphrase.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tuner.trial.outcome import TrialOutcome

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# "(EngineCore_DP0 pid=123) ERROR 11-29 19:00:00 [core.py:42] " / "[2026-11-29 19:00:00] " / "INFO:  "
_PYDANTIC_TAIL = re.compile(r"\s*\[type=\w+, input_value=.*$")  # pydantic's echo of every input
_PREFIX = re.compile(
    r"^(\([^)]*pid=\d+\)\s*)?"
    r"((DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s*)?"
    r"(\[\d{4}-\d\d-\d\d[ T][\d:.,]+[^\]]*\]\s*)?"
)
MAX_REASON = 300
# vLLM's multiprocess executor when a worker process dies: the signal is the cause, the tracebacks after it are noise
# ("RuntimeError: cancelled" from the requests it aborted would otherwise read as a bad config)
_WORKER_DIED = re.compile(r"Worker proc \S+ died unexpectedly \(exit code: (-\d+)\)")  # killed by a signal


@dataclass(frozen=True)
class Pattern:
    """One engine message and what it means."""

    regex: re.Pattern[str]
    outcome: TrialOutcome
    label: str
    unless: re.Pattern[str] | None = None  # a matching line that also matches this is not the cause


def pattern(regex: str, outcome: TrialOutcome, label: str, unless: str | None = None) -> Pattern:
    return Pattern(
        re.compile(regex, re.IGNORECASE), outcome, label, re.compile(unless, re.IGNORECASE) if unless else None
    )


# Lines that wrap the real cause ("see root cause above"): never quoted as the reason.
WRAPPERS = re.compile(
    r"initialization failed|see root cause|see stack trace|failed to start|died unexpectedly|^Traceback"
    r"|Received sigquit from a child process"
    r"|^raise |^\^+$|^File \"|During handling of the above exception",
    re.IGNORECASE,
)


# Order matters: the first pattern (in this order) found anywhere in the tail wins, so specific
# memory messages come before the generic "ValueError" a memory failure is often wrapped in.
COMMON: tuple[Pattern, ...] = (
    pattern(r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|CUDA error: out of memory", TrialOutcome.OOM,
            "out of memory"),
    pattern(r"No available memory for the cache blocks", TrialOutcome.OOM, "no memory left for the KV cache"),
    pattern(r"KV cache is needed, which is larger than the available KV cache memory"
            r"|larger than the available KV cache|max seq len .* KV cache", TrialOutcome.OOM,
            "KV cache smaller than max_model_len"),
    pattern(r"on startup is less than desired (GPU|CPU) memory utilization", TrialOutcome.OOM,
            "memory utilization above the free memory"),
    pattern(r"Insufficient memory|Not enough memory|not enough memory|Cannot allocate memory"
            r"|MemoryError|out of memory", TrialOutcome.OOM, "out of memory"),
    pattern(r"Address already in use|\[Errno 98\]|port .* (is )?(already )?in use", TrialOutcome.START_FAILED,
            "port in use", unless=r"retrying"),
    pattern(r"error: unrecognized arguments|error: argument|invalid choice", TrialOutcome.START_FAILED,
            "invalid argument"),
    pattern(r"\b(ValueError|ValidationError|AssertionError|NotImplementedError|TypeError|KeyError|"
            r"RuntimeError)\b", TrialOutcome.START_FAILED, "invalid config"),
)


def clean(line: str) -> str:
    """One log line without colour codes and engine log prefixes."""
    line = _ANSI.sub("", line).strip()
    return _PYDANTIC_TAIL.sub("", _PREFIX.sub("", line)).strip()


def _short(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def find(log_tail: str, patterns: Iterable[Pattern]) -> tuple[Pattern, str] | None:
    """The first pattern (in table order) found in the tail, with the last line it matches."""
    lines = [ln for ln in (clean(x) for x in log_tail.splitlines()) if ln and not WRAPPERS.search(ln)]
    for p in patterns:
        for line in reversed(lines):
            if p.regex.search(line) and not (p.unless and p.unless.search(line)):
                return p, line
    return None


def last_error_line(log_tail: str) -> str:
    """The most telling line when no pattern matched: the last one naming an error, else the last line."""
    lines = [clean(x) for x in log_tail.splitlines() if x.strip()]
    for line in reversed(lines):
        if re.search(r"error|exception|fatal|failed|abort", line, re.IGNORECASE) and not WRAPPERS.search(line):
            return line
    return lines[-1] if lines else "(empty log)"


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


def worker_death(log_tail: str) -> str | None:
    """'engine worker killed by SIGILL' when a signal killed an engine's worker process (the last such line), else
    None. A worker that raised (a bad block size) reports "exit code: None": its own message is the cause."""
    codes = _WORKER_DIED.findall(log_tail)
    return f"engine worker {describe_exit(int(codes[-1]))}" if codes else None


def classify(
    returncode: int | None, log_tail: str, patterns: Sequence[Pattern] = COMMON
) -> tuple[TrialOutcome, str]:
    """A failed start: the engine's own message decides; a live process that never got ready is a timeout; a worker
    process killed by a signal is a crash unless the engine said it ran out of memory."""
    found = find(log_tail, patterns)
    status = describe_exit(returncode)
    worker = worker_death(log_tail)
    if worker is not None and (found is None or found[0].outcome is not TrialOutcome.OOM):
        return TrialOutcome.CRASHED, _short(f"{worker} (server: {status})")
    if found is not None:
        p, line = found
        if returncode is None and p.outcome is TrialOutcome.START_FAILED:
            # A stray "ValueError" in a live server's log does not make a never-ready server a bad config.
            return TrialOutcome.TIMEOUT, _short(f"not ready before the deadline ({status}); last error: {line}")
        return p.outcome, _short(f"{p.label} ({status}): {line}")
    if returncode is None:
        return TrialOutcome.TIMEOUT, _short(f"not ready before the deadline; last log line: {last_error_line(log_tail)}")
    return TrialOutcome.START_FAILED, _short(f"engine exited ({status}): {last_error_line(log_tail)}")


def under_load(outcome: TrialOutcome, reason: str) -> tuple[TrialOutcome, str]:
    """A server that started and then died: out of memory stays oom, anything else is a crash."""
    if outcome is TrialOutcome.OOM:
        return outcome, _short(f"under load: {reason}")
    return TrialOutcome.CRASHED, _short(f"died under load: {reason}")
