"""The local executor's own failure paths, with real trial processes: a trial process that dies or hangs
fails its trial (the study goes on), and Ctrl-C stops the study as under Ray (finished trials kept,
nothing promoted, no trial process left), after which `--resume` completes it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli, small_study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.table import read_trials

pytestmark = pytest.mark.slow


def workers_of(pid: int) -> list[int]:
    """PIDs of the trial processes (python -m tuner.trial.worker) the driver `pid` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"tuner.trial.worker" in cmd:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tuner.run", "--executor", "local", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_rows(out: Path, n: int, proc: subprocess.Popen[str], timeout: float = 400) -> set[int]:
    """Wait until trials.parquet has `n` rows; returns the worker PIDs seen meanwhile."""
    seen: set[int] = set()
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        seen |= set(workers_of(proc.pid))
        if len(read_trials(out / "trials.parquet")) >= n:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"{n} trial(s) not finished: rc={proc.poll()}")


def test_a_dead_or_hung_trial_process_fails_its_trial_not_the_study(tmp_path: Path) -> None:
    study = small_study(tmp_path, budget={"trials": 3, "max_concurrent": 1}, promotion={"enabled": False})
    out = tmp_path / "killed"
    proc = start("--study", str(study), "--output", str(out))
    wait_rows(out, 1, proc)  # the baseline finished; the next trial's process is about to start
    victim = None
    while victim is None and proc.poll() is None:
        victim = next(iter(workers_of(proc.pid)), None)
        time.sleep(0.1)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    trials = read_trials(out / "trials.parquet")
    assert len(trials) == 3
    crashed = [t for t in trials if t.outcome is TrialOutcome.CRASHED]
    assert len(crashed) == 1 and "killed by SIGKILL" in crashed[0].reason, [(t.outcome, t.reason) for t in trials]
    assert all(t.outcome.ran for t in trials if t is not crashed[0])

    # every trial hangs (the simulator's HTTP face with its engine loop stopped: no request ever finishes) and
    # outlives a 1 s limit: stopped, failed as timeout. Virtual time is no hang: a trial can end within 1 s.
    hung = tmp_path / "hung"
    sim = {"flavour": "vllm", "gpu": "H200", "mode": "server", "faults": {"hang_after": 0}}
    proc = start("--study", str(small_study(tmp_path, name="hung", budget={"trials": 2, "max_concurrent": 2}, sim=sim,
                                             resources={"trial_timeout_s": 1}, promotion={"enabled": False})),
                 "--output", str(hung))
    seen: set[int] = set()
    while proc.poll() is None:  # the trial processes it starts, until it ends
        seen |= set(workers_of(proc.pid))
        time.sleep(0.1)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 3, stdout[-2000:] + stderr[-3000:]
    trials = read_trials(hung / "trials.parquet")
    assert [t.outcome for t in trials] == [TrialOutcome.TIMEOUT] * 2, [t.reason for t in trials]
    assert all("hung: no result after 1 s" in t.reason for t in trials)
    assert len(seen) == 2 and not [p for p in seen if alive(p)], f"stopped trial processes are gone: {seen}"


def test_ctrl_c_keeps_finished_trials_and_resume_completes(tmp_path: Path) -> None:
    study = small_study(tmp_path, budget={"trials": 4, "max_concurrent": 2})
    out = tmp_path / "out"
    proc = start("--study", str(study), "--output", str(out))
    seen = wait_rows(out, 1, proc)
    seen |= set(workers_of(proc.pid))
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout[-2000:] + stderr[-3000:]
    assert "nothing promoted" in stderr and "--resume" in stderr and "Traceback" not in stderr
    assert not (out / "promoted.yaml").exists()
    time.sleep(1)
    assert not [p for p in seen if alive(p)], "no trial process outlives the driver"
    kept = read_trials(out / "trials.parquet")
    assert 1 <= len(kept) < 4

    again = run_cli("--study", str(study), "--output", str(out), "--resume", "--executor", "local", "--no-promote")
    assert again.returncode in (0, 3), again.stdout[-2000:] + again.stderr[-3000:]
    trials = read_trials(out / "trials.parquet")
    assert sorted(t.number for t in trials) == [0, 1, 2, 3]
    assert {t.trial_id for t in kept} <= {t.trial_id for t in trials}
    with sqlite3.connect(out / "mlflow.db") as db:
        logged = sorted(v for (v,) in db.execute("select value from tags where key = 'servetune.trial_id'"))
    assert logged == sorted(t.trial_id for t in trials)
    with sqlite3.connect(out / "optuna.db") as db:
        assert db.execute("select count(*) from trials where state = 'RUNNING'").fetchone()[0] == 0
