"""The two records every part shares: a request to send and what happened to it.

Times are seconds. `arrival_s` is relative to the start of a load run; a record's timestamps are
on the same clock (virtual time for the simulator, `time.perf_counter()` minus run start for HTTP).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Request:
    id: int
    arrival_s: float  # offset from run start; ignored in closed-loop (concurrency) mode
    input_len: int  # prompt tokens
    output_len: int  # tokens to generate (max_tokens, with ignore-EOS)
    cls: str = "default"  # workload class name (per-class metrics)
    prefix_group: int = -1  # requests of one group share their first `prefix_len` tokens; -1 = none
    prefix_len: int = 0
    warmup: bool = False  # excluded from statistics


@dataclass(slots=True)
class RequestRecord:
    id: int
    cls: str
    input_len: int
    output_len: int  # requested output tokens
    sent_s: float
    first_token_s: float | None = None
    done_s: float | None = None
    # arrival of each streamed token/chunk: a list when streamed (HTTP, read back from Parquet), array('d') from
    # the simulator (raw doubles: no float object per token); both index, iterate, len and np.diff alike
    token_times: list[float] | array[float] = field(default_factory=list)
    output_tokens: int = 0  # server-reported usage when available, else counted
    error: str | None = None  # None = success; else a short reason ("timeout", "http 500: ...")
    preemptions: int = 0  # simulator only
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.done_s is not None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.sent_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.done_s is None else self.done_s - self.sent_s

    @property
    def tpot_s(self) -> float | None:
        """vLLM's definition: (E2E - TTFT) / (output tokens - 1)."""
        if self.done_s is None or self.first_token_s is None or self.output_tokens < 2:
            return None
        return (self.done_s - self.first_token_s) / (self.output_tokens - 1)
