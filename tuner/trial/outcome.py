"""Trial outcomes, mapped explicitly: a failed trial is never a fake zero throughput."""

from __future__ import annotations

from enum import Enum


class TrialOutcome(str, Enum):
    OK = "ok"  # ran, met the SLA at some load; objective is valid
    SLA_VIOLATED = "sla_violated"  # ran, but not even the lowest load point met the SLA
    START_FAILED = "start_failed"  # invalid config, engine refused to start, port in use
    OOM = "oom"  # out of memory at start or under load
    CRASHED = "crashed"  # engine died under load
    TIMEOUT = "timeout"  # never ready, or hung / no progress before a deadline
    REJECTED = "rejected"  # violated a known constraint; never launched

    def __str__(self) -> str:
        return self.value  # "oom" in messages and f-strings, not "TrialOutcome.OOM"

    @property
    def ran(self) -> bool:
        """True when the engine served load and metrics are meaningful."""
        return self in (TrialOutcome.OK, TrialOutcome.SLA_VIOLATED)

    @property
    def infeasible_config(self) -> bool:
        """True when the config itself cannot run (the search should learn the region)."""
        return self in (TrialOutcome.START_FAILED, TrialOutcome.OOM, TrialOutcome.REJECTED)
