"""GPU memory and utilisation sampled with pynvml while a trial runs, and the between-trials free check.

Why here and not in the pipeline: the device image has pynvml (nvidia-ml-py) but no Ray, so the thin
device-side driver samples the GPU itself. Without a GPU (CI, this machine) every call degrades to
"no samples" instead of failing, so the driver can be rehearsed against the simulator.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

try:
    import pynvml
except ImportError:  # pragma: no cover - the image and the venv both have it
    pynvml = None


def _init() -> bool:
    if pynvml is None:
        return False
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    return True


def gpu_count() -> int:
    if not _init():
        return 0
    return int(pynvml.nvmlDeviceGetCount())


def gpu_state(index: int = 0) -> dict[str, Any]:
    """Memory used (MiB), utilisation (%) and the compute processes on one GPU; {} without a GPU."""
    if not _init() or index >= pynvml.nvmlDeviceGetCount():
        return {}
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    mem = pynvml.nvmlDeviceGetMemoryInfo(h)
    util = pynvml.nvmlDeviceGetUtilizationRates(h)
    try:
        procs = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
    except pynvml.NVMLError:
        procs = []
    return {
        "mem_used_mib": mem.used / 2**20,
        "mem_total_mib": mem.total / 2**20,
        "util_pct": float(util.gpu),
        "mem_util_pct": float(util.memory),
        "processes": procs,
    }


def wait_gpu_free(index: int = 0, max_used_mib: float = 2048, timeout_s: float = 60) -> dict[str, Any]:
    """Block until no compute process holds the GPU and memory is back under `max_used_mib`.

    Returns the last state with ``free`` and ``waited_s``; a trial that leaves the GPU busy makes
    the next one unmeasurable, so the driver stops when ``free`` is False.
    """
    t0 = time.monotonic()
    while True:
        st = gpu_state(index)
        if not st:
            return {"free": True, "waited_s": 0.0, "gpu": False}
        free = not st["processes"] and st["mem_used_mib"] <= max_used_mib
        if free or time.monotonic() - t0 > timeout_s:
            return {**st, "free": free, "waited_s": round(time.monotonic() - t0, 2), "gpu": True}
        time.sleep(0.5)


@dataclass
class GpuSampler:
    """Background thread sampling one GPU every `period_s`; use as a context manager around a trial."""

    index: int = 0
    period_s: float = 0.5
    samples: list[dict[str, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> GpuSampler:
        if _init() and self.index < pynvml.nvmlDeviceGetCount():
            self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        h = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        while not self._stop.is_set():
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                util = pynvml.nvmlDeviceGetUtilizationRates(h)
                power = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
                sm_clock = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
            except pynvml.NVMLError:
                break
            self.samples.append({
                "t": time.time(),
                "mem_used_mib": mem.used / 2**20,
                "util_pct": float(util.gpu),
                "mem_util_pct": float(util.memory),
                "power_w": power,
                "sm_clock_mhz": float(sm_clock),
            })
            self._stop.wait(self.period_s)

    def window(self, t_from: float, t_to: float) -> dict[str, float]:
        """Mean/peak over samples taken between two epoch times (a load point's start and end)."""
        sel = [s for s in self.samples if t_from <= s["t"] <= t_to]
        return summarize_samples(sel)

    def summary(self) -> dict[str, float]:
        return summarize_samples(self.samples)


def summarize_samples(samples: list[dict[str, float]]) -> dict[str, float]:
    if not samples:
        return {}
    out: dict[str, float] = {"gpu.samples": float(len(samples))}
    for key in ("mem_used_mib", "util_pct", "mem_util_pct", "power_w"):
        vals = [s[key] for s in samples]
        out[f"gpu.{key}.mean"] = sum(vals) / len(vals)
        out[f"gpu.{key}.max"] = max(vals)
    return out
