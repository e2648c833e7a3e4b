"""ServerProcess with real processes: readiness, fail-fast, deadlines, group stop, port holding, reaper."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tuner.common.errors import EngineStartError
from tuner.engines import gpu
from tuner.engines.process import ServerProcess, group_members, http_get, reserve_port
from tuner.trial.outcome import TrialOutcome

pytestmark = pytest.mark.timeout(120)


def _server(standin: list[str], tmp_path: Path, *extra: str, ready_timeout_s: float = 30,
            stop_timeout_s: float = 5) -> ServerProcess:
    port, sock = reserve_port()
    return ServerProcess([*standin, "--port", str(port), *extra], env={"STANDIN_MARK": "1"},
                         log_path=tmp_path / "engine.log", host="127.0.0.1", port=port,
                         ready_timeout_s=ready_timeout_s, stop_timeout_s=stop_timeout_s, port_socket=sock)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_ready_serves_then_stops_whole_group(standin: list[str], tmp_path: Path) -> None:
    srv = _server(standin, tmp_path, "--ready-after", "1.0", "--child", stop_timeout_s=2)
    with srv:
        assert srv.start_seconds >= 1.0  # /health answered 503 for the first second
        assert srv.alive()
        status, body = http_get(srv.base_url + "/server_info", 5)
        assert status == 200 and b"--ready-after" in body
        members = group_members(srv.pid)
        assert len(members) >= 2  # the server and its SIGTERM-ignoring child
        assert srv.failure() is None
    assert not srv.alive()
    assert all(not _alive(p) for p in members), "a group member survived stop()"
    log = (tmp_path / "engine.log").read_text()
    assert log.startswith("# servetune: ") and "--child" in log.splitlines()[0]
    assert "SIGKILL" in log  # the child ignored SIGTERM, so the group was killed after the deadline
    assert "STANDIN_MARK" in log and "extra env keys" in log


def test_fail_fast_with_engine_message(standin: list[str], tmp_path: Path) -> None:
    srv = _server(standin, tmp_path, "--exit-code", "1", "--exit-after", "0.5",
                  "--message", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                  ready_timeout_s=60)
    t = time.monotonic()
    with pytest.raises(EngineStartError) as err:
        srv.__enter__()
    assert time.monotonic() - t < 30  # did not wait for the 60 s deadline
    assert err.value.outcome == TrialOutcome.OOM.value
    assert "CUDA out of memory" in err.value.reason and "exit 1" in err.value.reason


def test_never_ready_is_a_timeout_and_is_stopped(standin: list[str], tmp_path: Path) -> None:
    srv = _server(standin, tmp_path, "--never-ready", ready_timeout_s=2)
    t = time.monotonic()
    with pytest.raises(EngineStartError) as err, srv:
        pass
    assert 2 <= time.monotonic() - t < 30
    assert err.value.outcome == TrialOutcome.TIMEOUT.value
    assert "/health" in err.value.reason
    assert not _alive(srv.pid)


def test_fatal_line_then_lingering_is_stopped_early(standin: list[str], tmp_path: Path) -> None:
    """vLLM can log its fatal start error and take minutes to exit: stop it after a short grace."""
    port, sock = reserve_port()
    srv = ServerProcess([*standin, "--port", str(port), "--fail-and-linger",
                         "RuntimeError: Engine core initialization failed. See root cause above."],
                        env={}, log_path=tmp_path / "e.log", host="127.0.0.1", port=port, ready_timeout_s=60,
                        port_socket=sock, fatal=re.compile("Engine core initialization failed"), fatal_grace_s=1)
    t = time.monotonic()
    with pytest.raises(EngineStartError) as err, srv:
        pass
    assert time.monotonic() - t < 30
    assert err.value.outcome == TrialOutcome.START_FAILED.value
    assert "No common block size for 16" in err.value.reason and "fatal start error; stopped by servetune" in err.value.reason
    assert not _alive(srv.pid)


def test_port_is_held_until_ready(standin: list[str], tmp_path: Path) -> None:
    port, sock = reserve_port()
    other = socket.socket()
    with pytest.raises(OSError):
        other.bind(("127.0.0.1", port))  # a plain bind cannot take the reserved port
    other.close()
    srv = ServerProcess([*standin, "--port", str(port)], env={}, log_path=tmp_path / "e.log", host="127.0.0.1",
                        port=port, ready_timeout_s=30, port_socket=sock)
    with srv:
        assert sock.fileno() == -1  # released once the engine listened
        assert http_get(f"http://127.0.0.1:{port}/health", 5)[0] == 200


def test_port_in_use_is_start_failed(standin: list[str], tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        srv = ServerProcess([*standin, "--port", str(port), "--no-reuse"], env={}, log_path=tmp_path / "e.log",
                            host="127.0.0.1", port=port, ready_timeout_s=30)
        with pytest.raises(EngineStartError) as err, srv:
            pass
    finally:
        busy.close()
    assert err.value.outcome == TrialOutcome.START_FAILED.value
    assert "port in use" in err.value.reason and "98" in err.value.reason


def test_death_under_load_is_crashed(standin: list[str], tmp_path: Path) -> None:
    with _server(standin, tmp_path) as srv:
        http_get(srv.base_url + "/crash", 5)
        deadline = time.monotonic() + 10
        while srv.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        outcome, reason = srv.failure() or (None, "")
    assert outcome is TrialOutcome.CRASHED
    assert "illegal memory access" in reason and "exit 3" in reason


def test_hung_server_is_timeout(standin: list[str], tmp_path: Path) -> None:
    with _server(standin, tmp_path) as srv:
        os.kill(srv.pid, signal.SIGSTOP)  # alive but answering nothing
        try:
            outcome, reason = srv.failure(health_timeout_s=1) or (None, "")
        finally:
            os.kill(srv.pid, signal.SIGCONT)
    assert outcome is TrialOutcome.TIMEOUT and "hung" in reason


def test_missing_executable_is_start_failed(tmp_path: Path) -> None:
    srv = ServerProcess([str(tmp_path / "no-such-engine")], env={}, log_path=tmp_path / "e.log",
                        host="127.0.0.1", port=1, ready_timeout_s=5)
    with pytest.raises(EngineStartError) as err, srv:
        pass
    assert err.value.outcome == TrialOutcome.START_FAILED.value and "no-such-engine" in err.value.reason


def test_reaper_kills_the_group_when_servetune_dies(standin: list[str], tmp_path: Path) -> None:
    """A driver that dies without stop() (SIGKILL, Ray killing an actor) leaves no engine behind."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from pathlib import Path
        from tuner.engines.process import ServerProcess, reserve_port
        port, sock = reserve_port()
        srv = ServerProcess({standin!r} + ["--port", str(port), "--ignore-sigterm"], env={{}},
                            log_path=Path({str(tmp_path / "e.log")!r}), host="127.0.0.1", port=port,
                            ready_timeout_s=30, port_socket=sock)
        srv.__enter__()
        print(srv.pid, flush=True)
        os.kill(os.getpid(), 9)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 20  # the reaper sends SIGTERM, waits 5 s, then SIGKILL
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "engine outlived its driver"


def test_reused_log_file_classifies_this_run_only(standin: list[str], tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text("torch.OutOfMemoryError: CUDA out of memory (an earlier run)\n")
    srv = _server(standin, tmp_path, "--exit-code", "2", "--message", "error: argument --max-num-seqs: bad")
    with pytest.raises(EngineStartError) as err, srv:
        pass
    assert err.value.outcome == TrialOutcome.START_FAILED.value and "--max-num-seqs" in err.value.reason
    assert "earlier run" in (tmp_path / "engine.log").read_text()  # kept, but not read as this run's cause


def test_log_header_masks_secret_flags(standin: list[str], tmp_path: Path) -> None:
    port, sock = reserve_port()
    srv = ServerProcess([*standin, "--port", str(port), "--api-key", "sk-abcdefgh12345678"], env={"HF_TOKEN": "x"},
                        log_path=tmp_path / "e.log", host="127.0.0.1", port=port, ready_timeout_s=30,
                        port_socket=sock)
    with srv:
        pass
    header = (tmp_path / "e.log").read_text().splitlines()[:2]
    assert "--api-key" in header[0] and "sk-abcdefgh12345678" not in header[0]
    assert "HF_TOKEN" in header[1] and "'x'" not in header[1]


def test_stop_is_idempotent(standin: list[str], tmp_path: Path) -> None:
    srv = _server(standin, tmp_path)
    with srv:
        pass
    srv.stop()
    srv.stop()
    assert srv.failure() is None  # stopped on purpose: not a failure


def test_gpu_checks_without_gpu() -> None:
    if gpu.available():
        pytest.skip("this test covers machines without a GPU")
    assert gpu.snapshot([0]) == {}
    assert gpu.wait_free([0], timeout_s=1) == (True, "no GPU check")
    assert gpu.wait_free([]) == (True, "no GPU check")
