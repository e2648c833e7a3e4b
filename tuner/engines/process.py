"""The server-process helper every engine shares: port, process group, log, readiness, stop, cleanup.

    port, sock = reserve_port()
    with ServerProcess(argv, env=..., log_path=..., host="127.0.0.1", port=port,
                       ready_timeout_s=600, port_socket=sock) as srv:
        ...  # srv.base_url is ready: /health answered 200, then the model list

Why each piece:
- the port stays bound by us (SO_REUSEADDR, never listening) until the engine is ready, so nothing
  else can take it between "found a free port" and "the engine bound it" (engines bind with
  SO_REUSEADDR, which the kernel allows beside a bound, non-listening socket);
- the engine runs in its own session/process group, so stopping it stops its workers too, and a
  small reaper process kills that group if servetune itself dies without stopping it;
- readiness fails fast when the process exits (or logs the engine's fatal start error and lingers),
  and times out at a deadline; all raise
  EngineStartError with an outcome and the engine's own message (tuner.engines.failures);
- stop: SIGTERM to the group, SIGKILL after stop_timeout_s, wait until no member is left, then
  (on GPU hosts) wait until the trial's GPUs are free again.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tuner.common.errors import EngineStartError
from tuner.common.redact import redact
from tuner.engines import failures, gpu
from tuner.trial.outcome import TrialOutcome

Classifier = Callable[[int | None, str], tuple[TrialOutcome, str]]

# Runs in its own interpreter: waits for its stdin to close; unless told "done", kills the group.
_REAPER = (
    "import os,signal,sys\n"
    "pgid=int(sys.argv[1])\n"
    "msg=sys.stdin.read()\n"
    "if 'done' not in msg:\n"
    "    for sig in (signal.SIGTERM, signal.SIGKILL):\n"
    "        try:\n"
    "            os.killpg(pgid, sig)\n"
    "        except OSError:\n"
    "            break\n"
    "        if sig == signal.SIGTERM:\n"
    "            import time; time.sleep(5)\n"
)
CLASSIFY_LINES = 500  # engine tracebacks from several processes are long; the cause is rarely last
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def reserve_port(host: str = "127.0.0.1") -> tuple[int, socket.socket]:
    """A free port and the socket that holds it: pass both to ServerProcess, which releases it when ready."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, 0))
    except OSError:
        sock.close()
        raise
    return int(sock.getsockname()[1]), sock


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def http_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """GET without proxies (a proxy must never see 127.0.0.1); (status, body), status 0 when unreachable."""
    try:
        with _NO_PROXY.open(url, timeout=timeout_s) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""
    except (OSError, ValueError):
        return 0, b""


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group; Linux /proc, else a signal-0 probe."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


class ServerProcess:
    """One engine server as a context manager: started, ready, and always stopped with its whole group."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        host: str,
        port: int,
        ready_timeout_s: float,
        stop_timeout_s: float = 30,
        classify: Classifier | None = None,
        port_socket: socket.socket | None = None,
        gpu_ids: Sequence[int] = (),
        gpu_free_timeout_s: float = 120,
        cwd: str | Path | None = None,
        fatal: re.Pattern[str] | None = None,
        fatal_grace_s: float = 5,
        health_path: str = "/health",
        models_path: str = "/v1/models",
        poll_s: float = 0.25,
    ) -> None:
        if not argv:
            raise ValueError("argv must not be empty")
        self.argv = [str(a) for a in argv]
        self.env = dict(env)  # extra variables, laid over this process's environment
        self.log_path = Path(log_path)
        self.host, self.port = host, port
        self.base_url = f"http://{_url_host(host)}:{port}"
        self.ready_timeout_s, self.stop_timeout_s = ready_timeout_s, stop_timeout_s
        self.classify: Classifier = classify or failures.classify
        self.gpu_ids = list(gpu_ids)
        self.gpu_free_timeout_s = gpu_free_timeout_s
        self.health_path, self.models_path, self.poll_s = health_path, models_path, poll_s
        self.cwd = cwd  # None: ours
        self.fatal, self.fatal_grace_s = fatal, fatal_grace_s  # engine's "start failed for good" line
        self._log_start = self._log_offset = 0
        self.pid = -1
        self.start_seconds = float("nan")
        self.gpu_free: tuple[bool, str] = (True, "no GPU check")
        self._port_socket = port_socket
        self._proc: subprocess.Popen[bytes] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._stopped = False
        self._gpu_baseline: dict[int, gpu.GpuState] = {}
        self._t0 = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> ServerProcess:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Launch the process in its own session, output to the log file, plus its reaper."""
        if self._proc is not None:
            raise RuntimeError("ServerProcess already started")
        self._gpu_baseline = gpu.snapshot(self.gpu_ids)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # A reused log file keeps its old text; this run's classification reads only what follows.
        self._log_start = self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.log_path, "ab") as log:
            log.write(f"# servetune: {shlex.join(redact(self.argv))}\n".encode())  # no --api-key values
            if self.env:
                log.write(f"# servetune: extra env keys: {sorted(self.env)}\n".encode())
            log.flush()
            self._t0 = time.monotonic()
            try:
                self._proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=env, start_new_session=True, close_fds=True, cwd=self.cwd,
                )
            except OSError as exc:
                self._release_port()
                self._stopped = True
                raise EngineStartError(
                    TrialOutcome.START_FAILED, f"cannot run {self.argv[0]!r}: {exc}"
                ) from exc
        self.pid = self._proc.pid
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(self.pid)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

    def wait_ready(self) -> None:
        """Poll /health then the model list until both answer; fail fast if the process exits."""
        assert self._proc is not None, "start() first"
        deadline = self._t0 + self.ready_timeout_s
        fatal_seen: float | None = None
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self._fail(rc)
            if fatal_seen is None and self._fatal_in_log():
                fatal_seen = time.monotonic()
            if fatal_seen is not None and time.monotonic() - fatal_seen >= self.fatal_grace_s:
                self._fail(None, fatal=True)  # it said it failed but lingers (vLLM can, for minutes)
            status, _ = http_get(self.base_url + self.health_path, timeout_s=2)
            if status == 200:
                status, _ = http_get(self.base_url + self.models_path, timeout_s=5)
                if status == 200:
                    self.start_seconds = time.monotonic() - self._t0
                    self._release_port()
                    return
            if time.monotonic() >= deadline:
                self._fail(None)
            time.sleep(self.poll_s)

    def _fatal_in_log(self) -> bool:
        """New log text since the last look contains the engine's "start failed for good" line."""
        if self.fatal is None:
            return False
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(self._log_start, self._log_offset - 4096))  # a line may straddle two looks
                data = f.read()
                self._log_offset = f.tell()
        except OSError:
            return False
        return bool(self.fatal.search(data.decode("utf-8", "replace")))

    def _fail(self, returncode: int | None, fatal: bool = False) -> None:
        tail = self.log_tail(CLASSIFY_LINES)
        self.stop()
        if fatal:
            rc = self._proc.returncode if self._proc else None
            outcome, reason = self.classify(rc, tail)
            if outcome is TrialOutcome.TIMEOUT:  # the engine said it failed: not a slow start
                outcome = TrialOutcome.START_FAILED
            # our own SIGTERM/SIGKILL is not the engine's exit status: say what happened instead
            reason = reason.replace(f"({failures.describe_exit(rc)})", "(fatal start error; stopped by servetune)", 1)
            raise EngineStartError(TrialOutcome(outcome), reason)
        outcome, reason = self.classify(returncode, tail)
        if returncode is None and outcome is TrialOutcome.TIMEOUT:
            reason = f"no answer on {self.health_path} within {self.ready_timeout_s:g}s; {reason}"
        raise EngineStartError(TrialOutcome(outcome), reason)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def log_tail(self, n_lines: int = 60) -> str:
        """The last lines of the engine log (read from the end; logs can be large)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(self._log_start, size - 256 * 1024))
                data = f.read()
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-n_lines:])

    def failure(self, health_timeout_s: float = 10) -> tuple[TrialOutcome, str] | None:
        """After a load run: None when the server is fine; else why it is not (crash, OOM, hang)."""
        if self._proc is None or self._stopped:
            return None
        rc = self._proc.poll()
        if rc is None:
            status, _ = http_get(self.base_url + self.health_path, timeout_s=health_timeout_s)
            if status == 200:
                return None
            return TrialOutcome.TIMEOUT, (
                f"server alive but {self.health_path} gave {status or 'no answer'} within "
                f"{health_timeout_s:g}s (hung); last log line: {failures.last_error_line(self.log_tail(CLASSIFY_LINES))}"
            )
        return failures.under_load(*self.classify(rc, self.log_tail(CLASSIFY_LINES)))

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL after stop_timeout_s, wait for every member; idempotent."""
        if self._stopped or self._proc is None:
            self._stopped = True
            self._release_port()
            return
        self._stopped = True
        pgid = self._proc.pid
        try:
            self._signal_group(pgid, signal.SIGTERM)
            if not self._wait_group(pgid, self.stop_timeout_s):
                self._log(f"group {pgid} still running {self.stop_timeout_s:g}s after SIGTERM: SIGKILL")
                self._signal_group(pgid, signal.SIGKILL)
                self._wait_group(pgid, 30)
            self._proc.wait()
        finally:
            self._dismiss_reaper()
            self._release_port()
        if self.gpu_ids:
            self.gpu_free = gpu.wait_free(self.gpu_ids, self._gpu_baseline, self.gpu_free_timeout_s)
            if not self.gpu_free[0]:
                self._log(f"GPUs not free {self.gpu_free_timeout_s:g}s after stop: {self.gpu_free[1]}")

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _wait_group(self, pgid: int, timeout_s: float) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while True:
            self._proc.poll()  # reap the leader so it does not count as a member
            if not group_members(pgid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _dismiss_reaper(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is None:
            return
        try:
            reaper.communicate(b"done", timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            reaper.kill()
            reaper.wait()

    def _release_port(self) -> None:
        sock, self._port_socket = self._port_socket, None
        if sock is not None:
            sock.close()

    def _log(self, line: str) -> None:
        try:
            with open(self.log_path, "a") as f:
                f.write(f"# servetune: {line}\n")
        except OSError:
            pass

    def __del__(self) -> None:
        # Last resort when a caller forgot the context manager; the reaper covers a hard exit.
        proc = getattr(self, "_proc", None)
        if proc is not None and not getattr(self, "_stopped", True) and proc.poll() is None:
            self._signal_group(proc.pid, signal.SIGKILL)
