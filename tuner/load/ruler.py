"""The client's own timing error, measured during every run: the error bar of every latency figure.

Every latency servetune reports is read off its own client. Where reads carry the kernel's receive
time (tuner.load.http1: Linux, plain http) a token's time is when its packet arrived, whatever
the event loop was doing; what is left of the client's error is
- the send side: a request is stamped right before its write, and the write's own duration
  (`p99_client_send_gap_ms`) is how far that stamp can be from the bytes leaving;
- reads that held several tokens of one stream (the loop came late, bytes piled up): all get the
  last packet's time, the earlier ones may have come up to the read's span before it (the span
  runs from the start of the connection's previous read). `client_shared_tokens` is the share of
  token stamps that shared a read with a later token of their stream, `p99_client_rx_bound_ms`
  the P99 over all token stamps of that bound (0 for a token alone in its read). A server that
  writes the usage chunk and [DONE] right after the last token (same step) is taken at its word;
- mapping the kernel's CLOCK_REALTIME onto perf_counter: the offset's bracket and its change over
  the window (`client_clock_error_ms`).
Then `client_error_ms` = send gap P99 + read bound P99 + clock error: every token stamp's error is
under the read bound, so this bounds the P99 of TTFT and ITL errors. `client_rx_kernel` is the
share of reads that had a kernel stamp (1 normally; 0 over TLS or off Linux).

Without kernel stamps (or when any read lacked one) the client's delay in noticing a byte is the
error of every TTFT, ITL and E2E, and `client_error_ms` is the loop lag's P99 (the larger of the
two when stamps were mixed). `Ruler` measures that delay the way a token sees it:
a small helper process writes its `perf_counter()` (CLOCK_MONOTONIC, shared by all processes on
Linux) into a pipe every few milliseconds, the event loop reads the pipe like a stream socket,
and the gap between the write and the loop's timestamp is one sample. A busy loop (parsing a
burst, a Parquet write, a GC pause, a probe) and the OS scheduling the client late (a loaded
machine) both show up in it, exactly as they would in a token's timestamp. GC pauses are kept
too, from `gc.callbacks`.

Summary keys (milliseconds; vLLM-style `<stat>_<name>_ms`, as tuner.common.metric_keys):
- `p50_client_lag_ms`, `p99_client_lag_ms`, `p99.9_client_lag_ms`, `max_client_lag_ms` and
  `client_lag_samples`: the write-to-timestamp gaps over the measured window.
- `client_error_ms`: the error bar of the run's latencies (above); `p99_client_lag_ms` without kernel stamps.
- `max_client_gc_ms`, `total_client_gc_ms`: garbage-collection pauses in the window.
- `p99_client_send_late_ms`: how late requests went out against their schedule (open loop; TTFT
  counts from the actual send, so this is the offered load's fidelity, not a latency error).
- `client_connects`: connections opened inside the measured window (0 when warmed up).
- `client_busy`: the fraction of the window the loop spent reading and parsing. The pipe samples
  measure the loop's latency, not its throughput: a client that cannot keep up leaves a backlog in
  the socket buffers that user-space timestamps carry while each pass (and each pipe sample) still
  looks quick. Without kernel stamps, over `MAX_BUSY` the run is suspect too (with them the
  backlog shows as shared reads, in the read bound).
- `client_error_budget_ms`, `client_suspect`: with an SLA, the budget is `MAX_ERROR_FRACTION` of its
  tightest latency limit; `client_suspect` is 1 when `client_error_ms` is over it (or unmeasured,
  or, without kernel stamps, `client_busy` is over `MAX_BUSY`):
  the run's latencies are not to be trusted to the precision the SLA needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tuner.spec.sla import SLATerm

ERROR = "client_error_ms"
BUDGET = "client_error_budget_ms"
SUSPECT = "client_suspect"
PERIOD_S = 0.005
MAX_ERROR_FRACTION = 0.05  # a run is suspect when the client's P99 error exceeds 5% of the tightest SLA term
MAX_BUSY = 0.5  # ... or when its loop spent more than half the window parsing reads (near saturation)
_PINGER = (
    "import os,struct,sys,time\n"
    "fd=int(sys.argv[1]);p=float(sys.argv[2]);pc=time.perf_counter;pack=struct.pack\n"
    "try:\n"
    " while True:\n"
    "  time.sleep(p)\n"
    "  os.write(fd,pack('d',pc()))\n"
    "except OSError:\n"
    " pass\n"
)


class _PipeReader(asyncio.Protocol):
    def __init__(self, out: list[float]) -> None:
        self.out = out
        self.buf = b""
        self.since = 0.0  # samples written before this (perf_counter) are not counted

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buf = self.buf + data
        n = len(buf) // 8
        for (t,) in struct.iter_unpack("d", buf[:n * 8]):
            if t >= self.since:
                self.out.append(now - t)
        self.buf = buf[n * 8:]


class Ruler:
    """Start before the measured window, `stop()` after it; `summary()` gives the `client.*` keys."""

    def __init__(self, period_s: float = PERIOD_S, scale: float = 1.0) -> None:
        self.period_s = period_s
        self.scale = scale  # the target's time scale: inputs are wall seconds, the summary is on the run's clock
        self.gaps: list[float] = []
        self.gc_pauses: list[float] = []
        self.send_late: list[float] = []
        self.connects = 0
        self.busy = math.nan  # fraction of the window spent parsing reads (set by the target)
        # set by the target: the window's send gaps (s), (tokens, span s) of shared reads, token stamps,
        # share of reads with a kernel stamp, the clock map's change and bracket
        self.send_gaps: list[float] = []
        self.shared: list[tuple[int, float]] = []
        self.tokens = 0
        self.kernel_share = math.nan
        self.clock_drift_s = 0.0
        self.clock_uncertainty_s = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._reader = _PipeReader(self.gaps)
        self._gc_start: float | None = None
        self._on = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        pipe = self._spawn()
        self._transport, _ = await loop.connect_read_pipe(lambda: self._reader, pipe)
        gc.callbacks.append(self._gc)
        self._on = True

    def _spawn(self) -> Any:
        """The helper process (before the measured window: a fork costs the loop a few ms)."""
        r, w = os.pipe()
        try:
            self._proc = subprocess.Popen([sys.executable, "-S", "-c", _PINGER, str(w), str(self.period_s)],
                                          pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
        except OSError:
            self._proc = None  # no helper: the run goes on, its error bar is unmeasured (client.suspect)
        finally:
            os.close(w)
        return os.fdopen(r, "rb", buffering=0)

    def stop(self) -> None:
        if not self._on:
            return
        self._on = False
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._gc)
        if self._transport is not None:
            self._transport.close()
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

    def reset(self) -> None:
        """Forget samples so far (the warm-up phase's, anything written before now), keep measuring."""
        self._reader.since = time.perf_counter()
        self.gaps.clear()
        self.gc_pauses.clear()
        self.send_late.clear()
        self.shared.clear()

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            self.gc_pauses.append(time.perf_counter() - self._gc_start)
            self._gc_start = None

    def summary(self) -> dict[str, float]:
        ms = 1e3 * self.scale  # wall seconds to milliseconds of the run's clock
        gaps = np.asarray(self.gaps, dtype=float) * ms
        out: dict[str, float] = {"client_lag_samples": float(gaps.size)}
        if gaps.size:
            p50, p99, p999 = np.percentile(gaps, [50, 99, 99.9])
            out.update({"p50_client_lag_ms": float(p50), "p99_client_lag_ms": float(p99),
                        "p99.9_client_lag_ms": float(p999), "max_client_lag_ms": float(gaps.max())})
        else:
            out.update({f"{k}_client_lag_ms": math.nan for k in ("p50", "p99", "p99.9", "max")})
        sends = np.asarray(self.send_gaps, dtype=float) * ms
        out["p99_client_send_gap_ms"] = float(np.percentile(sends, 99)) if sends.size else math.nan
        out["max_client_send_gap_ms"] = float(sends.max()) if sends.size else math.nan
        n_shared = sum(k for k, _ in self.shared)
        out["client_shared_tokens"] = n_shared / self.tokens if self.tokens else 0.0
        out["p99_client_rx_bound_ms"] = _p99_bound(self.shared, self.tokens) * ms
        out["client_clock_error_ms"] = (self.clock_uncertainty_s + abs(self.clock_drift_s)) * ms
        out["client_rx_kernel"] = float(self.kernel_share)
        kernel = (out["p99_client_send_gap_ms"] if sends.size else 0.0) + out["p99_client_rx_bound_ms"] \
            + out["client_clock_error_ms"]
        if self.kernel_share == 1.0:
            out[ERROR] = kernel
        elif self.kernel_share > 0.0:
            out[ERROR] = max(kernel, out["p99_client_lag_ms"])
        else:
            out[ERROR] = out["p99_client_lag_ms"]
        gcs = np.asarray(self.gc_pauses, dtype=float) * ms
        out["max_client_gc_ms"] = float(gcs.max()) if gcs.size else 0.0
        out["total_client_gc_ms"] = float(gcs.sum())
        late = np.asarray(self.send_late, dtype=float) * ms
        out["p99_client_send_late_ms"] = float(np.percentile(late, 99)) if late.size else math.nan
        out["client_connects"] = float(self.connects)
        out["client_busy"] = float(self.busy)
        return out


def _p99_bound(shared: list[tuple[int, float]], tokens: int) -> float:
    """P99 over every token stamp of its bound: `span` for the `k` tokens of each shared read, 0 for the rest."""
    if not shared or not tokens:
        return 0.0
    rank = tokens * 0.01  # tokens above the P99
    seen = 0
    for k, span in sorted(shared, key=lambda x: -x[1]):
        seen += k
        if seen > rank:
            return span
    return 0.0


def tightest_limit_ms(sla: Sequence[SLATerm]) -> float | None:
    """The smallest latency limit of the SLA (ms), the precision its verdict needs; None without one."""
    limits = [t.limit for t in sla if t.latency is not None]
    return min(limits) if limits else None


def attach(summary: dict[str, float], client: dict[str, float], sla: Sequence[SLATerm],
           fraction: float = MAX_ERROR_FRACTION) -> None:
    """Add the client's keys (a Ruler summary; none for the simulator) and, with a latency SLA, the
    budget and the `client_suspect` flag."""
    if not client:
        return
    summary.update(client)
    limit = tightest_limit_ms(sla)
    if limit is None:
        return
    budget = fraction * limit
    err = summary[ERROR]
    summary[BUDGET] = budget
    busy = summary.get("client_busy", 0.0) if summary.get("client_rx_kernel") != 1.0 else 0.0
    summary[SUSPECT] = 0.0 if (math.isfinite(err) and err <= budget and not busy > MAX_BUSY) else 1.0


def warning(summary: dict[str, Any]) -> str | None:
    """One line for a run whose client error exceeds its budget, else None."""
    if summary.get(SUSPECT) != 1.0:
        return None
    err, budget = summary.get(ERROR), summary.get(BUDGET)
    busy = summary.get("client_busy") if summary.get("client_rx_kernel") != 1.0 else None
    if busy is not None and busy > MAX_BUSY and err is not None and math.isfinite(err) and budget is not None \
            and err <= budget:
        return (f"the client spent {busy:.0%} of the window parsing reads (over {MAX_BUSY:.0%}): near its throughput "
                "limit its timestamps carry a backlog the lag probe cannot see; use --client-processes")
    shown = "unmeasured" if err is None or not math.isfinite(err) else f"{err:.2f} ms"
    return (f"client timing error (P99) {shown} exceeds {budget:.2f} ms ({MAX_ERROR_FRACTION:.0%} of the tightest "
            "SLA term): the load generator was too busy or descheduled; its latencies are less precise than the "
            "SLA needs")
