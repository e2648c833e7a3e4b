"""Ctrl-C and SIGTERM during a real study (real Ray, the sim server engine, a SQLite MLflow store): the
running trial is stopped, finished trials are kept in trials.parquet and MLflow, nothing is promoted, the
parent run is KILLED, the driver says how to --resume and exits 130; no process of the run outlives it.
While the first run holds the output folder, a second run on it is refused (exit 2, naming the holder),
and every socket the run listens on (`ss -ltnp`) is bound to loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.tracking import MlflowClient
from relhelp import (
    RAY_ENV,
    descendants,
    fault_study_data,
    listening,
    logged_pids,
    off_loopback,
    pids_running,
    wait_gone,
)

from tests.conftest import ROOT, run_cli
from tuner.common.atomic import read_table

pytestmark = pytest.mark.slow


def rows(out: Path) -> dict[str, dict[str, Any]]:
    path = out / "trials.parquet"
    return {r["trial_id"]: r for r in read_table(path).to_pylist()} if path.exists() else {}


def start(tmp: Path, name: str, trials: int = 6) -> tuple[subprocess.Popen[bytes], list[str], Path, str, Path]:
    data = fault_study_data({}, name=name, budget={"trials": trials, "max_concurrent": 1},
                            promotion={"enabled": True, "confirm_runs": 0})
    study = tmp / f"{name}.yaml"
    study.write_text(yaml.safe_dump(data))
    out = tmp / "out"
    argv = [sys.executable, "-m", "tuner.run", "--study", str(study), "--output", str(out)]
    log = tmp / "driver.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV},
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, argv, out, data["model"]["served_name"], log


def wait_mid_trial(proc: subprocess.Popen[bytes], out: Path, tag: str, log: Path) -> None:
    """Until a trial is recorded and the next trial's engine serves (so the signal lands mid-trial)."""
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        if rows(out) and pids_running(tag):
            return
        time.sleep(0.1)
    raise AssertionError("no trial finished in time:\n" + log.read_text()[-3000:])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_signal_stops_the_study_cleanly(sig: signal.Signals, tmp_path: Path) -> None:
    proc, argv, out, tag, log = start(tmp_path, f"sig{int(sig)}")
    try:
        wait_mid_trial(proc, out, tag, log)
        holder = json.loads((out / "run.lock").read_text())
        assert holder["pid"] == proc.pid and holder["ray_pids"], holder
        bound = listening(descendants(proc.pid))  # the driver, its Ray, the workers, the engine
        assert bound and off_loopback(bound) == [], bound
        if sig == signal.SIGINT:  # the folder is taken: a second run is refused before it writes anything
            second = run_cli(*argv[3:], timeout=300)
            assert second.returncode == 2, second.stderr[-2000:]
            assert f"is in use by another servetune run (pid {proc.pid}" in second.stderr, second.stderr
        engines, before = pids_running(tag), rows(out)
        proc.send_signal(sig)
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert rc == 130, text[-3000:]
    assert "Traceback" not in text and "Fatal Python error" not in text and "Stack trace" not in text, text[-3000:]
    assert f"--output {out} --resume" in text and "nothing promoted" in text, text[-2000:]
    assert wait_gone(engines + holder["ray_pids"] + logged_pids(out), timeout_s=30) == [], "processes outlived the run"
    assert pids_running(tag) == [] and not (out / "run.lock").exists()
    after = rows(out)
    assert set(before) <= set(after) and len(after) < 6, "finished trials kept, the rest not run"
    assert all(after[t]["outcome"] == r["outcome"] for t, r in before.items())
    assert not (out / "promoted.yaml").exists() and not (out / "serve_config.yaml").exists(), "promoted anyway"
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"sig{int(sig)}")
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert [p.info.status for p in parents] == ["KILLED"]
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    assert sorted(r.data.tags["servetune.trial_id"] for r in children) == sorted(after), "MLflow == trials.parquet"
    assert not client.search_registered_models(), "a model was registered for an interrupted study"
