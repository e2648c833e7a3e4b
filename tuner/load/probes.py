"""Engine probes kept with a run: /metrics scraped every second and GPU samples from NVML.

Prometheus names differ per engine; both map onto the same sample keys (running, waiting,
kv_cache_usage, preemptions). Where there is no /metrics endpoint or no GPU, probing stops quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

# sample key -> the engine's metric names (without prefix), first found wins; values summed over label
# sets. Each engine's home owns its table (tuner.engines.<engine>.metric_names).
MetricNames = Mapping[str, tuple[str, ...]]


def parse_prometheus(text: str, prefix: str, names: MetricNames) -> dict[str, float]:
    """Pick our keys out of a Prometheus text exposition, by the engine's `names`."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        brace, space = line.find("{"), line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name, value_text = line[:brace], line[line.rfind("}") + 1:]
        else:
            name, value_text = line[:space], line[space:]
        try:
            value = float(value_text.split()[0])
        except (ValueError, IndexError):
            continue
        key = name[len(prefix):].strip()
        values[key] = values.get(key, 0.0) + value
    sample: dict[str, float] = {}
    for key, candidates in names.items():
        for c in candidates:
            if c in values:
                sample[key] = values[c]
                break
    return sample


async def scrape_metrics(
    session: aiohttp.ClientSession, url: str, prefix: str, names: MetricNames, clock: Callable[[], float],
    out: list[dict[str, Any]], period_s: float = 1.0,
) -> None:
    """Append a sample every `period_s` until cancelled; stop after the endpoint fails twice."""
    failures = 0
    while failures < 2:
        t = clock()
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=max(period_s, 1.0))) as resp:
                if resp.status != 200:
                    failures += 1
                else:
                    sample = parse_prometheus(await resp.text(), prefix, names)
                    if sample:
                        out.append({"kind": "metrics", "t": t, **sample})
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            failures += 1
        await asyncio.sleep(max(0.0, period_s - (clock() - t)))


class GpuSampler:
    """NVML samples (memory, utilisation, power) of every visible GPU; a no-op without NVML or GPUs."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self._nv = pynvml
        except Exception:  # noqa: BLE001 - no library, driver or device: no GPU samples, quietly
            self._nv = None

    @property
    def active(self) -> bool:
        return self._nv is not None and bool(self._handles)

    def sample(self, t: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.active:
            return out
        nv = self._nv
        for i, h in enumerate(self._handles):
            s: dict[str, Any] = {"kind": "gpu", "t": t, "gpu": i}
            with contextlib.suppress(Exception):
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                s["mem_used_gib"] = mem.used / 2**30
                s["mem_total_gib"] = mem.total / 2**30
            with contextlib.suppress(Exception):
                s["util_pct"] = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
            with contextlib.suppress(Exception):
                s["power_w"] = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
            out.append(s)
        return out

    def close(self) -> None:
        if self._nv is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()
            self._nv = None


async def sample_gpus(sampler: GpuSampler, clock: Callable[[], float], out: list[dict[str, Any]],
                      period_s: float = 1.0) -> None:
    """Append GPU samples every `period_s` until cancelled (NVML calls run off the event loop)."""
    while sampler.active:
        t = clock()
        out.extend(await asyncio.to_thread(sampler.sample, t))
        await asyncio.sleep(max(0.0, period_s - (clock() - t)))
