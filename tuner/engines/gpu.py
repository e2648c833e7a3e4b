"""GPU freedom: before the next trial is placed on a GPU, the last server's memory must be gone.

A stopped engine's CUDA context can linger for seconds after its process group exits; a trial that
starts then sees less free memory and may OOM for a reason that is not its own config. With NVML
(pynvml) we wait until each of the trial's GPUs shows no compute process and its used memory is back
near the baseline taken before the server started. Without NVML or GPUs everything is a no-op.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

SLACK_BYTES = 512 * 1024 * 1024  # memory above the baseline still counted as "back to baseline"


@dataclass(frozen=True)
class GpuState:
    index: int
    used_bytes: int
    pids: tuple[int, ...]


@contextmanager
def _nvml() -> Iterator[Any | None]:
    """pynvml, initialised, or None where there is no library or no driver."""
    try:
        import pynvml
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure (no driver, no device) means "no GPU here"
        yield None
        return
    try:
        yield pynvml
    finally:
        with suppress(Exception):
            pynvml.nvmlShutdown()


def _state(nv: Any, index: int) -> GpuState:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    used = int(nv.nvmlDeviceGetMemoryInfo(handle).used)
    procs: list[Any] = []
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        with suppress(Exception):
            procs.extend(getattr(nv, getter)(handle))
    return GpuState(index, used, tuple(sorted({int(p.pid) for p in procs})))


def count() -> int:
    """How many GPUs NVML sees (0 without NVML, a driver or a device)."""
    with _nvml() as nv:
        if nv is None:
            return 0
        try:
            return int(nv.nvmlDeviceGetCount())
        except Exception:  # noqa: BLE001
            return 0


def available() -> bool:
    """True when NVML answers and sees at least one GPU."""
    return count() > 0


def snapshot(gpu_ids: Sequence[int]) -> dict[int, GpuState]:
    """Used memory and processes per GPU now (empty without NVML)."""
    if not gpu_ids:
        return {}
    with _nvml() as nv:
        if nv is None:
            return {}
        out: dict[int, GpuState] = {}
        for i in gpu_ids:
            with suppress(Exception):
                out[i] = _state(nv, i)
        return out


def wait_free(
    gpu_ids: Sequence[int],
    baseline: dict[int, GpuState] | None = None,
    timeout_s: float = 60,
    poll_s: float = 0.5,
    ignore_pids: Sequence[int] = (),
) -> tuple[bool, str]:
    """Block until the GPUs hold no new process and their memory is back near baseline.

    Returns (free, detail); detail names what is still there when the deadline passed.
    No NVML or no GPU ids: (True, "no GPU check").
    """
    if not gpu_ids:
        return True, "no GPU check"
    baseline = baseline or {}
    with _nvml() as nv:
        if nv is None:
            return True, "no GPU check"
        deadline = time.monotonic() + timeout_s
        while True:
            busy: list[str] = []
            for i in gpu_ids:
                try:
                    st = _state(nv, i)
                except Exception:  # noqa: BLE001 - a GPU NVML cannot read is not ours to wait for
                    continue
                base = baseline.get(i)
                new_pids = set(st.pids) - set(base.pids if base else ()) - set(ignore_pids)
                limit = (base.used_bytes if base else 0) + SLACK_BYTES
                if new_pids or (base is not None and st.used_bytes > limit):
                    busy.append(f"GPU {i}: pids {sorted(new_pids)}, {st.used_bytes / 2**30:.1f} GiB used")
            if not busy:
                return True, "GPUs free"
            if time.monotonic() >= deadline:
                return False, "; ".join(busy)
            time.sleep(poll_s)
