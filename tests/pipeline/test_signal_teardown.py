"""Ctrl-C after the study's summary (while Ray shuts down at exit) ends nothing early and prints no traceback.

A real `python -m tuner.run` process with its own local Ray; the signal is a real SIGINT.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, small_study
from tuner.run.lock import session_processes

pytestmark = pytest.mark.slow


def test_ctrl_c_during_ray_shutdown_lets_it_finish(tmp_path: Path) -> None:
    """Seen in the audit: a Ctrl-C right after the summary raised KeyboardInterrupt inside Ray's atexit
    shutdown ('Exception ignored in atexit callback' and a traceback) and left ray::DashboardAgent and
    ray::RuntimeEnvAgent running."""
    study = small_study(tmp_path, name="late-signal", budget={"trials": 1, "max_concurrent": 1},
                        promotion={"enabled": False})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "local"}
    proc = subprocess.Popen([sys.executable, "-m", "tuner.run", "--study", str(study), "--output",
                             str(tmp_path / "out")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "MLflow UI" in line:  # the last summary line: what follows is the exit, Ray's shutdown
                break
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    sessions = [os.path.basename(p) for p in glob.glob(f"/tmp/ray/session_*_{proc.pid}")]
    assert sessions, "the run's Ray session folder was not found"
    deadline = time.monotonic() + 15
    while (left := session_processes(sessions[0])) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:  # the test's own leftovers go, whatever it asserts
        os.kill(pid, signal.SIGKILL)
    assert left == [], "Ray processes outlived a run whose shutdown a late Ctrl-C interrupted"

