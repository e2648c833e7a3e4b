"""Fixtures: the fake streaming server as a real subprocess on a free port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("fake_server.py")
RAW_SERVER = Path(__file__).with_name("raw_server.py")


class Server:
    def __init__(self, *args: str, script: Path = SERVER) -> None:
        self.proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"fake server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> object:
        import json
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def fake_server() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(*args: str) -> Server:
        s = Server(*args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@contextlib.contextmanager
def _realtime() -> Iterator[bool]:
    """Run the calling thread under SCHED_FIFO where permitted (root), so that other tenants of a busy
    machine do not preempt a 1 ms timing check; restored afterwards. Yields whether it applied."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))
    except (AttributeError, PermissionError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@pytest.fixture
def realtime() -> Callable[[], contextlib.AbstractContextManager[bool]]:
    return _realtime
