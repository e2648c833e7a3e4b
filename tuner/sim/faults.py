"""Fault switches of the sim server, so launchers and load generators can be tested on real failures.

Counting is by accepted requests: with `--fault-crash-after 5` the server serves five requests and
dies (exit 1, engine-like message on stderr) when the sixth arrives; `--fault-hang-after N` stops
the engine loop (requests in flight and later ones never finish, /health stays 200, as a wedged
engine does); `--fault-stall-after N` makes every later stream stop after half its tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuner.sim.live import LiveEngine


def add_fault_flags(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("fault switches (tests)")
    g.add_argument("--fault-fail-at-start", action="store_true", help="exit 1 with an engine error before listening")
    g.add_argument("--fault-oom-at-start", action="store_true", help="exit 1 with a CUDA OOM before listening")
    g.add_argument("--fault-never-ready", action="store_true", help="listen, but /health answers 503 forever")
    g.add_argument("--fault-crash-after", type=int, default=None, metavar="N", help="die when request N+1 arrives")
    g.add_argument("--fault-hang-after", type=int, default=None, metavar="N", help="stop producing tokens after N requests")
    g.add_argument("--fault-stall-after", type=int, default=None, metavar="N",
                   help="streams of requests after the N-th stall half-way")
    g.add_argument("--fault-http500-rate", type=float, default=0.0, metavar="R", help="answer HTTP 500 with probability R")
    g.add_argument("--fault-seed", type=int, default=0)


@dataclass(frozen=True)
class Faults:
    fail_at_start: bool = False
    oom_at_start: bool = False
    never_ready: bool = False
    crash_after: int | None = None
    hang_after: int | None = None
    stall_after: int | None = None
    http500_rate: float = 0.0
    seed: int = 0

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> Faults:
        return cls(a.fault_fail_at_start, a.fault_oom_at_start, a.fault_never_ready, a.fault_crash_after,
                   a.fault_hang_after, a.fault_stall_after, a.fault_http500_rate, a.fault_seed)

    def at_start(self) -> None:
        if self.fail_at_start:
            print("RuntimeError: Engine core initialization failed. See root cause above. "
                  "(injected: --fault-fail-at-start)", file=sys.stderr, flush=True)
            sys.exit(1)
        if self.oom_at_start:
            print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                  "capacity of 139.80 GiB of which 1.02 GiB is free. (injected: --fault-oom-at-start)",
                  file=sys.stderr, flush=True)
            sys.exit(1)

    def on_request(self, accepted: int, live: LiveEngine) -> None:
        if self.crash_after is not None and accepted > self.crash_after:
            print(f"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
                  f"above for the root cause. (injected: crash after {self.crash_after} requests)",
                  file=sys.stderr, flush=True)
            os._exit(1)
        if self.hang_after is not None and accepted > self.hang_after:
            live.hung = True

    def stalls(self, accepted: int) -> bool:
        return self.stall_after is not None and accepted > self.stall_after
