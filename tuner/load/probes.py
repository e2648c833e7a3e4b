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
    """Pick our keys out of a Prometheus text exposition, by the engine's `names`.

    Runs on the load generator's event loop, so it looks only for the wanted names (`str.find`,
    scanned in C) instead of a Python pass over every line: vLLM's histograms run to thousands of
    lines, and the time spent here delays every stream's timestamp."""
    text = "\n" + text
    values: dict[str, float] = {}
    for w in {c for cands in names.values() for c in cands}:
        needle = "\n" + prefix + w
        pos = text.find(needle)
        while pos >= 0:
            start = pos + len(needle)
            end = text.find("\n", start)
            line = text[start:end if end >= 0 else len(text)]
            pos = text.find(needle, start) if end >= 0 else -1
            if line[:1] == "{":
                line = line[line.rfind("}") + 1:]
            elif line[:1] not in (" ", "\t"):
                continue  # a longer name that starts with this one
            try:
                value = float(line.split()[0])
            except (ValueError, IndexError):
                continue
            values[w] = values.get(w, 0.0) + value
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
