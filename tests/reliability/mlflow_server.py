"""A real `mlflow server` process on 127.0.0.1 for the fault tests (its store and artifacts in one folder)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    """Start, stop and restart (same port, same store) an `mlflow server`; its own process group."""

    def __init__(self, root: Path, port: int | None = None, admin_password: str | None = None) -> None:
        """`admin_password`: MLflow's basic-auth app (every API call needs a user; `admin` has this password)."""
        self.root, self.port, self.admin_password = root, port or free_port(), admin_password
        self.proc: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180) -> MlflowServer:
        mlflow = Path(sys.executable).parent / "mlflow"
        argv = [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                "--backend-store-uri", f"sqlite:///{self.root / 'store.db'}",
                "--artifacts-destination", str(self.root / "artifacts")]
        env = dict(os.environ)
        if self.admin_password:
            argv += ["--app-name", "basic-auth"]
            env.update(MLFLOW_AUTH_ADMIN_PASSWORD=self.admin_password, MLFLOW_FLASK_SERVER_SECRET_KEY="servetune-test",
                       MLFLOW_AUTH_CONFIG_PATH=str(self._auth_config()))
        log = (self.root / "server.log").open("ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=self.root, env=env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError((self.root / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        raise RuntimeError("mlflow server did not answer:\n" + (self.root / "server.log").read_text()[-3000:])

    def _auth_config(self) -> Path:
        """The auth app's users database in this server's folder (its default is ./basic_auth.db)."""
        path = self.root / "basic_auth.ini"
        path.write_text(f"[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///{self.root / 'auth.db'}\n"
                        "admin_username = admin\n")
        return path

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None
