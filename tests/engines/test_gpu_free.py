""""GPU free after stop", tested on its logic with a scripted NVML (no GPU driver on this machine):
a stopped engine's process and its lingering CUDA memory hold the GPU until both are gone; another
tenant's process present before the start, or memory within the slack, does not."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tuner.engines import gpu

GiB = 2**30


class FakeNVML:
    """pynvml's calls that tuner.engines.gpu makes, over a timeline of (used bytes, pids) per poll."""

    def __init__(self, timeline: list[tuple[int, list[int]]]) -> None:
        self.timeline, self.reads, self.inits, self.shutdowns = timeline, 0, 0, 0

    def nvmlInit(self) -> None:  # pynvml names
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i != 0:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return i

    def _now(self) -> tuple[int, list[int]]:
        return self.timeline[min(self.reads, len(self.timeline) - 1)]

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        used = self._now()[0]
        return SimpleNamespace(used=used, total=141 * GiB, free=141 * GiB - used)

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        pids = self._now()[1]
        self.reads += 1  # one poll = memory, compute, graphics
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        return []


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    def install(timeline: list[tuple[int, list[int]]]) -> FakeNVML:
        fake = FakeNVML(timeline)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake
    return install


def test_engine_process_and_lingering_memory_hold_the_gpu(nvml) -> None:
    idle = (2 * GiB, [])
    fake = nvml([idle])
    base = gpu.snapshot([0])
    assert gpu.available() and base[0].used_bytes == 2 * GiB and base[0].pids == ()
    # engine (pid 4242) running, then exited but its CUDA context still holds 60 GiB, then gone
    fake.timeline, fake.reads = [(62 * GiB, [4242])] * 3 + [(62 * GiB, [])] * 2 + [(2 * GiB + GiB // 4, [])], 0
    t0 = time.monotonic()
    free, detail = gpu.wait_free([0], base, timeout_s=10, poll_s=0.01)
    assert (free, detail) == (True, "GPUs free")
    assert fake.reads == 6, "free only once the process is gone AND memory is back within the slack"
    assert time.monotonic() - t0 < 5
    assert fake.inits == fake.shutdowns


def test_a_gpu_still_held_at_the_deadline_says_what_holds_it(nvml) -> None:
    nvml([(2 * GiB, [])])
    base = gpu.snapshot([0])
    nvml([(40 * GiB, [4242])])
    free, detail = gpu.wait_free([0], base, timeout_s=0.2, poll_s=0.02)
    assert not free and detail == "GPU 0: pids [4242], 40.0 GiB used"
    nvml([(40 * GiB, [])])  # process gone, memory not back
    free, detail = gpu.wait_free([0], base, timeout_s=0.1, poll_s=0.02)
    assert not free and "pids []" in detail and "40.0 GiB" in detail


def test_other_tenants_and_ignored_pids_do_not_block(nvml) -> None:
    nvml([(10 * GiB, [77])])  # another process was on the GPU before the engine started
    base = gpu.snapshot([0])
    nvml([(10 * GiB, [77, 88])])
    assert gpu.wait_free([0], base, timeout_s=0.1, poll_s=0.02, ignore_pids=[88]) == (True, "GPUs free")
    assert gpu.wait_free([0], base, timeout_s=0.1, poll_s=0.02)[0] is False
    assert gpu.wait_free([0, 5], base, timeout_s=0.1, poll_s=0.02, ignore_pids=[88]) == (True, "GPUs free")
