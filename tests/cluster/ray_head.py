"""A real local Ray head (`ray start --head --block`) with token authentication, for cluster tests.

Everything is private to one test: its own HOME (so ~/.ray/auth_token of the machine is not used),
its own temp dir, free ports (other Ray clusters may run on the same machine), and on exit only the
processes this head started are stopped (its descendants, by pid); never `ray stop`, which would
stop every Ray cluster on the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.common.procs import descendants

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct free ports: all bound at once, so the OS cannot hand the same one out twice (picked one by one, a
    port freed by the first bind can come back: Ray then refuses two components on one port)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class RayHead:
    """A running head: `dashboard_url` for `ray job submit --address`, `client_env` to authenticate."""

    root: Path
    token: str
    dashboard_url: str
    gcs_address: str
    process: subprocess.Popen[bytes]
    head_env: dict[str, str] = field(default_factory=dict)

    def client_env(self, with_token: bool = True) -> dict[str, str]:
        """Environment of a client on another machine: token auth on, token from RAY_AUTH_TOKEN."""
        env = {k: v for k, v in self.head_env.items() if k not in ("RAY_AUTH_TOKEN_PATH",)}
        env.pop("RAY_ADDRESS", None)
        if with_token:
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token)
        else:
            env.pop("RAY_AUTH_MODE", None)
            env.pop("RAY_AUTH_TOKEN", None)
        return env

    def driver_env(self, pythonpath: str) -> dict[str, str]:
        """A driver on a cluster node: connects to this head by its GCS address, with the token."""
        return {**self.client_env(), "RAY_ADDRESS": self.gcs_address, "PYTHONPATH": pythonpath}

    def get_json(self, path: str) -> Any:
        req = urllib.request.Request(self.dashboard_url + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)

    def http_status(self, path: str, token: str | None) -> int:
        req = urllib.request.Request(self.dashboard_url + path)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def stop(self, timeout_s: float = 60) -> None:
        """SIGTERM the head (it stops what it started), then SIGKILL any of its descendants left."""
        kids = descendants(self.process.pid)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        deadline = time.monotonic() + 10
        for pid in kids + descendants(self.process.pid):
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


PORT_NAMES = ("port", "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
              "metrics-export-port", "ray-client-server-port", "runtime-env-agent-port")
PORT_CLASH = ("is trying to use a port number", "already in use")  # ray start's words when a chosen port was taken


def start_head(num_cpus: int = 2, num_gpus: int = 4, timeout_s: float = 120, attempts: int = 3) -> RayHead:
    """`ray start --head --block` with token auth; a start that fails because another process took one of its free
    ports between the choice and Ray's bind is tried again on new ports (other Ray clusters may run here)."""
    for attempt in range(attempts):
        try:
            return _start_head(num_cpus, num_gpus, timeout_s)
        except RuntimeError as exc:
            if attempt + 1 == attempts or not any(w in str(exc) for w in PORT_CLASH):
                raise
    raise AssertionError("unreachable")


def _start_head(num_cpus: int, num_gpus: int, timeout_s: float) -> RayHead:
    """`ray start --head --block` with token auth (RAY_AUTH_MODE=token, token file via RAY_AUTH_TOKEN_PATH)."""
    root = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))  # short: Ray's socket paths must stay < 108 chars
    home = root / "home"
    home.mkdir()
    token = secrets.token_hex(32)
    token_path = root / "token"
    token_path.write_text(token)
    token_path.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", RAY_AUTH_MODE="token",
               RAY_AUTH_TOKEN_PATH=str(token_path), RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
    argv = [str(VENV_BIN / "ray"), "start", "--head", "--block", f"--num-cpus={num_cpus}",
            f"--num-gpus={num_gpus}", f"--temp-dir={root / 'r'}", "--include-dashboard=true",
            "--dashboard-host=127.0.0.1", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
            *(f"--{k}={v}" for k, v in ports.items())]
    log = (root / "head.log").open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    head = RayHead(root=root, token=token, dashboard_url=f"http://127.0.0.1:{ports['dashboard-port']}",
                   gcs_address=f"127.0.0.1:{ports['port']}", process=proc, head_env=env)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            text = (root / "head.log").read_text(errors="replace")[-3000:]
            head.stop()
            raise RuntimeError(f"ray start --head exited with {proc.returncode}:\n{text}")
        try:
            if head.http_status("/api/jobs/", token) == 200:
                return head
        except OSError:
            pass
        if time.monotonic() > deadline:
            text = (root / "head.log").read_text(errors="replace")[-3000:]
            head.stop()
            raise RuntimeError(f"Ray head not ready after {timeout_s:.0f}s:\n{text}")
        time.sleep(1)
