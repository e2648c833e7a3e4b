"""Live study progress in the terminal, so a user watching a long study sees where it stands.

On a terminal it is a rich Live view (running trials, counts by outcome, best SLA-feasible result and
its ratio to the baseline, time left in the budget). When stdout is not a terminal (CI, `ray job
submit` logs, nohup) it degrades to one plain line per event, which stays readable in log files.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tuner.trial.result import TrialResult


class StudyProgress:
    """Tracks trial events; renders them live on a tty or as log lines otherwise. Thread-safe."""

    def __init__(
        self,
        total_trials: int,
        time_limit_s: float | None,
        *,
        objective_metric: str = "output_throughput",
        stream: IO[str] | None = None,
        live: bool | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.total_trials = total_trials
        self.time_limit_s = time_limit_s
        self.objective_metric = objective_metric
        self._stream = stream if stream is not None else sys.stdout
        self._live_wanted = self._stream.isatty() if live is None else live
        self._clock = clock
        self._lock = threading.Lock()
        self._start = clock()
        self.running: dict[str, tuple[str, dict[str, Any], float]] = {}
        self.finished: list[TrialResult] = []
        self._live: Live | None = None

    # --- events -------------------------------------------------------------------------------
    def trial_started(self, trial_id: str, engine: str, params: dict[str, Any]) -> None:
        with self._lock:
            self.running[trial_id] = (engine, dict(params), self._clock())
        self._emit(f"trial {trial_id} started ({engine}) {_fmt_params(params)}".rstrip())

    def trial_finished(self, result: TrialResult) -> None:
        with self._lock:
            self.running.pop(result.trial_id, None)
            self.finished = [t for t in self.finished if t.trial_id != result.trial_id] + [result]
        what = (f"{self.objective_metric}={result.objective:.4g} capacity={result.capacity:.4g}"
                if result.feasible and result.objective is not None and result.capacity is not None
                else result.reason or "")
        if result.binding:
            what += f" (bound by {result.binding})"
        self._emit(f"trial {result.trial_id} {result.outcome.value} {what}".rstrip() + " | " + self.summary_line())

    def restore(self, results: list[TrialResult]) -> None:
        """Count trials a resumed study finished before (no per-trial lines; one summary line)."""
        with self._lock:
            known = {t.trial_id for t in self.finished}
            new = [t for t in results if t.trial_id not in known]
            self.finished += new
        if new:
            self._emit(f"resumed with {len(new)} finished trial(s) | " + self.summary_line())

    # --- state ----------------------------------------------------------------------------------
    @property
    def failed(self) -> int:
        """Trials whose config did not produce a result (not merely over the SLA)."""
        return sum(1 for t in self.finished if not t.outcome.ran)

    def best(self) -> TrialResult | None:
        ok = [t for t in self.finished if t.feasible and t.objective is not None]
        return max(ok, key=lambda t: t.objective or 0.0) if ok else None

    def baseline(self) -> TrialResult | None:
        return next((t for t in self.finished if t.baseline), None)

    def ratio_to_baseline(self) -> float | None:
        best, base = self.best(), self.baseline()
        if best is None or base is None or not base.feasible or not base.objective or best.objective is None:
            return None
        return best.objective / base.objective

    def time_left_s(self) -> float | None:
        if self.time_limit_s is None:
            return None
        return max(0.0, self.time_limit_s - (self._clock() - self._start))

    def summary_line(self) -> str:
        with self._lock:
            done, running = len(self.finished), len(self.running)
        parts = [f"done {done}/{self.total_trials}", f"running {running}", f"failed {self.failed}"]
        best = self.best()
        if best is not None and best.objective is not None:
            ratio = self.ratio_to_baseline()
            parts.append(f"best {best.objective:.4g} (trial {best.trial_id}"
                         + (f", {ratio:.2f}x baseline)" if ratio else ")"))
        else:
            parts.append("best: none feasible yet")
        left = self.time_left_s()
        if left is not None:
            parts.append(f"time left {_fmt_duration(left)}")
        return ", ".join(parts)

    # --- rendering ------------------------------------------------------------------------------
    def __enter__(self) -> StudyProgress:
        self._start = self._clock()
        if self._live_wanted:
            console = Console(file=self._stream, force_terminal=True)
            self._live = Live(get_renderable=self._render, console=console, refresh_per_second=2,
                              transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        else:
            self._emit(self._end_line())

    def _end_line(self) -> str:
        """The last line: a study stopped by a signal (or a fault) is not 'finished', and the trials that were
        running then are stopped, not running."""
        from tuner.search.signals import Interrupt

        if Interrupt.signum is None and Interrupt.failure is None:
            return "study finished: " + self.summary_line()
        with self._lock:
            stopped = len(self.running)
            self.running.clear()
        why = Interrupt.name() if Interrupt.signum is not None else "a fault"
        return (f"study stopped by {why}: " + self.summary_line()
                + (f"; {stopped} trial(s) were running when it stopped" if stopped else ""))

    def _emit(self, line: str) -> None:
        if self._live is not None:
            return  # the live view redraws from state
        self._stream.write(f"[servetune] {line}\n")
        self._stream.flush()

    def _render(self) -> Group:
        with self._lock:
            running = list(self.running.items())
            finished = list(self.finished)
        counts = Counter(t.outcome.value for t in finished)
        head = Text(self.summary_line(), style="bold")
        outcomes = Text("outcomes: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none yet"))
        table = Table(title="running trials", expand=False)
        for col in ("trial", "engine", "elapsed", "params"):
            table.add_column(col)
        now = self._clock()
        for tid, (engine, params, started) in running:
            table.add_row(tid, engine, _fmt_duration(now - started), _fmt_params(params, limit=80))
        recent = Table(title="last finished", expand=False)
        for col in ("trial", "outcome", self.objective_metric, "reason"):
            recent.add_column(col)
        for t in finished[-5:]:
            recent.add_row(t.trial_id, t.outcome.value, f"{t.objective:.4g}" if t.objective is not None else "-",
                           (t.reason or "")[:60])
        return Group(head, outcomes, table, recent)


def _fmt_params(params: dict[str, Any], limit: int = 200) -> str:
    text = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fmt_duration(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"
