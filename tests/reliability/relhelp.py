"""Helpers for the fault tests: a small sim-server study, and process checks by PID through /proc."""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from tuner.common import procs
from tuner.spec.study import Study

# For a CLI run that starts Ray: "local" gives the driver a Ray of its own, never another cluster on this
# machine (tuner.run.cli's init_ray tries address "auto" first); a generous raylet start wait for busy CI machines.
RAY_ENV = {"RAY_ADDRESS": "local", "RAY_raylet_start_wait_time_s": "180"}


def fault_study_data(faults: dict[str, Any], tag: str | None = None, **changes: Any) -> dict[str, Any]:
    """A study on the sim server (time_scale 5, short timeouts) whose served name is a unique tag,
    so every engine process it starts can be found by its command line. The client reads the server on its
    clock, timeouts included: 3 s there is 0.6 s of wall time, before the SLA's 5 s (1 s) can stop a point, so a
    hung engine's trial is a timeout."""
    tag = tag or "fault-" + uuid.uuid4().hex[:10]
    data: dict[str, Any] = {
        "name": "faults", "engine": "sim",
        "sim": {"mode": "server", "time_scale": 5, "faults": faults, "start_timeout_s": 6, "stop_timeout_s": 5},
        "model": {"name": "Qwen/Qwen3-0.6B", "served_name": tag, "max_model_len": 4096},
        "workload": {"classes": [{"name": "c", "weight": 1, "input": {"dist": "fixed", "value": 64},
                                  "output": {"dist": "fixed", "value": 16}}], "warmup_requests": 2},
        "capacity": {"low": 8, "high": 16, "max_points": 1, "requests_per_point": 16, "request_timeout_s": 3},
        "sla": ["p99_ttft_ms <= 5000"],
        "search_space": {"exclude": ["block_size", "scheduling_policy", "max_num_partial_prefills"]},
    }
    data.update(changes)
    return data


def fault_study(faults: dict[str, Any], **changes: Any) -> Study:
    return Study.model_validate(fault_study_data(faults, **changes))


def pids_running(token: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if token in cmd and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def logged_pids(root: Path) -> list[int]:
    """PIDs the sim servers printed in the engine logs under root ("... (pid N)")."""
    return [int(m) for log in root.rglob("engine.log")
            for m in re.findall(r"\(pid (\d+)\)", log.read_text(errors="replace"))]


def wait_gone(pids: list[int], timeout_s: float = 15) -> list[int]:
    """The PIDs still alive after timeout_s (a stop is asynchronous only for the reaper's grace)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in pids if pid_alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def descendants(pid: int) -> list[int]:
    """pid and every live process below it (by /proc parent links)."""
    return [pid, *procs.descendants(pid)]


def listening(pids: list[int]) -> list[str]:
    """`ss -ltnp` lines (local address, process) of the TCP sockets these processes listen on."""
    import subprocess

    text = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    want = {f"pid={p}," for p in pids}
    return [" ".join(line.split()[3:4] + line.split()[5:]) for line in text.splitlines()
            if any(w in line for w in want)]


def off_loopback(lines: list[str]) -> list[str]:
    """Listening sockets not bound to a loopback address."""
    loop = ("127.0.0.1:", "[::1]:", "[::ffff:127.0.0.1]:")
    return [ln for ln in lines if not ln.startswith(loop)]
