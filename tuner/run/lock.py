"""One study per output folder: an flock on `<output>/run.lock` held for the whole run.

The lock file also records who holds it (PID, start time) and the local Ray processes that run started,
so the next run on a folder whose driver was killed (kill -9) can stop that Ray's leftovers and say so.
The kernel drops the flock when its holder dies, so a stale file never blocks a later run.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError

LOCK = "run.lock"


@dataclass
class Leftovers:
    """What a killed previous run left: its PID, its state, and the Ray helper PIDs this run stopped."""

    pid: int | None = None
    stopped: list[int] = field(default_factory=list)


class OutputLock:
    def __init__(self, out: Path) -> None:
        self.path = out / LOCK
        self.fd: int | None = None
        self.info: dict[str, Any] = {}

    def acquire(self) -> Leftovers:
        """Take the lock or refuse (exit 2) naming the holder; clean up after a killed previous holder."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            who = f"pid {holder['pid']}" if holder.get("pid") else "another process"
            since = f", started {holder['started']}" if holder.get("started") else ""
            raise SpecError(f"output folder {self.path.parent} is in use by another servetune run ({who}{since})",
                            "--output", "wait for that run to end (or stop it), or choose another --output") from None
        self.fd = fd
        previous = _read(fd)
        left = Leftovers(pid=previous.get("pid"))
        if previous.get("ray_pids"):
            left.stopped = stop_ray_leftovers(previous["ray_pids"], previous.get("ray_session", ""))
        self.info = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        self._write()
        return left if previous.get("pid") else Leftovers()

    def record_ray(self, pids: list[int], session: str) -> None:
        self.info.update(ray_pids=pids, ray_session=session)
        self._write()

    def release(self) -> None:
        if self.fd is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self.fd)  # closing drops the flock
        self.fd = None

    def _write(self) -> None:
        assert self.fd is not None
        data = json.dumps(self.info).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)


def _read(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stop_ray_leftovers(pids: list[int], session: str) -> list[int]:
    """Kill the listed Ray helper processes that are still alive and still Ray's (checked by their
    command line naming the session, so a reused PID is never touched), and every other process that holds
    a file of that session open: the raylet's agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`), which
    outlive a killed raylet, are not in the list and their command line names no session."""
    stopped = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if session and session in cmd and _kill(pid):
            stopped.append(pid)
    stopped += [pid for pid in session_processes(session) if pid not in stopped and _kill(pid)]
    return stopped


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return False
    return True


def session_processes(session: str) -> list[int]:
    """Live processes (of this user; others' fds are unreadable) holding a file of the Ray session folder
    `session` open: its logs. A session name carries its start time and driver PID, so no other run matches."""
    if not session:
        return []
    mark, me, found = f"/{session}/", os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{entry.name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if mark in os.readlink(f"/proc/{entry.name}/fd/{fd}"):
                    found.append(int(entry.name))
                    break
            except OSError:
                continue
    return found


def local_ray_processes() -> tuple[list[int], str]:
    """PIDs of the Ray helper processes this driver started (none when it joined a cluster) and the session."""
    try:
        import ray._private.worker as worker

        node = worker._global_node
        if node is None or not node.head:
            return [], ""
        pids = [info.process.pid for infos in node.all_processes.values() for info in infos
                if getattr(info, "process", None) is not None]
        return pids, os.path.basename(node.get_session_dir_path())
    except Exception:  # noqa: BLE001 - Ray internals: no leftovers recorded is the safe fallback
        return [], ""
