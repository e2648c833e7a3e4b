"""A real local Ray head with Serve started on a free HTTP port, shared by the Serve tests of a module.

The head comes from tests/cluster/ray_head.py (private temp dir, free ports, token auth, stops only
what it started). Replicas import serve_apps and tuner from this checkout (PYTHONPATH).
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.ray_head import VENV_BIN, RayHead, free_port, start_head
from tuner.promote.deploy import ServeAdmin

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ServeCluster:
    head: RayHead
    http_port: int

    @property
    def dashboard(self) -> str:
        return self.head.dashboard_url

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def env(self) -> dict[str, str]:
        """Environment for CLI clients (serve, python -m tuner.promote): token, dashboard, this checkout."""
        return {**self.head.client_env(), "PYTHONPATH": str(ROOT), "RAY_DASHBOARD_ADDRESS": self.dashboard}

    def cli(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env(), cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)

    def admin(self) -> ServeAdmin:
        return ServeAdmin(self.dashboard, headers={"Authorization": f"Bearer {self.head.token}"})

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.http_base + path, timeout=30) as resp:
            return resp.read()


@contextmanager
def serve_cluster() -> Iterator[ServeCluster]:
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + old if old else "")
    try:
        head = start_head(num_cpus=2, num_gpus=0)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    cluster = ServeCluster(head, free_port())
    try:
        proc = cluster.cli(str(VENV_BIN / "serve"), "start", "--address", head.gcs_address,
                           "--http-host", "127.0.0.1", "--http-port", str(cluster.http_port), timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the proxy answers 404/503 for unknown routes once it is up
            try:
                urllib.request.urlopen(cluster.http_base + "/", timeout=5)
                break
            except urllib.error.HTTPError:
                break  # the proxy answered (404: no app on "/" yet)
            except OSError:
                time.sleep(1)
        yield cluster
    finally:
        head.stop()
