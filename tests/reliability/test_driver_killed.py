"""The driver itself is killed (SIGKILL) in the middle of a sim-server study that owns its local Ray:
no engine process survives it, the next run (`--resume`) stops the Ray helpers the killed driver left and
finishes the study without losing a finished trial;
trials.parquet, the MLflow runs and the output folder stay consistent."""

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
from relhelp import RAY_ENV, fault_study_data, logged_pids, pid_alive, pids_running, wait_gone

from tests.conftest import ROOT, run_cli
from tuner.common.atomic import read_table
from tuner.engines.process import group_members

pytestmark = pytest.mark.slow
TRIALS = 4


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    path = out / "trials.parquet"
    if not path.exists():
        return {}
    # Written by temp file + rename and read from one open (read_table): a reader racing the writer never sees a torn
    # file (pq.read_table on the path opened it twice and once read half of each version here).
    return {r["trial_id"]: r for r in read_table(path).to_pylist()}


def test_killed_driver_leaves_no_engine_and_resume_loses_nothing(tmp_path: Path) -> None:
    data = fault_study_data({}, name="killed", budget={"trials": TRIALS, "max_concurrent": 1},
                            promotion={"enabled": False})
    # Qwen3-32B weights (~65 GB) do not fit at low memory fractions: some trials fail to start (oom), the rest serve.
    data["model"].update(name="Qwen/Qwen3-32B")
    data["search_space"]["overrides"] = {"gpu_memory_utilization": {"low": 0.2, "high": 0.6}}
    tag = data["model"]["served_name"]
    study = tmp_path / "killed.yaml"
    study.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "tuner.run", "--study", str(study), "--output", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV}
    with (tmp_path / "first.log").open("w") as log:
        driver = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and driver.poll() is None:
            if _rows(out) and pids_running(tag):  # a trial is recorded and the next one's engine is up
                break
            time.sleep(0.1)
        assert driver.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        engines = pids_running(tag)
        before = _rows(out)
        assert engines and before, "the kill must land while an engine is serving"
        ray_pids = json.loads((out / "run.lock").read_text())["ray_pids"]  # the Ray helpers this driver started
        assert ray_pids
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        # The engine's reaper (or Ray tearing down the trial's worker) stops the engine's whole group.
        assert wait_gone(engines, timeout_s=60) == [], f"engine processes outlived the driver: {engines}"
    finally:
        if driver.poll() is None:
            driver.kill()

    # The next run on the folder finds the dead holder's lock and stops the Ray helpers it left.
    proc = run_cli(*argv[3:], "--resume", timeout=500, env=RAY_ENV)
    left = [p for p in ray_pids if pid_alive(p)]
    for pid in group_members(driver.pid):  # never leave a leftover behind, even when the check fails
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr[-3000:]
    assert left == [], f"Ray helpers of the killed driver still alive after the next run: {left}"
    assert f"the previous run on {out.resolve()} (pid {driver.pid}) ended without cleaning up" in proc.stderr
    assert not (out / "run.lock").exists()
    after = _rows(out)
    for tid, row in before.items():  # no finished trial lost or changed
        assert tid in after and after[tid]["outcome"] == row["outcome"], tid
    numbers = sorted(r["number"] for r in after.values())
    assert len(after) >= TRIALS and set(range(TRIALS)) <= set(numbers), numbers
    assert all(r["reason"] for r in after.values() if r["outcome"] != "ok")
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "temp files left behind"

    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    exp = client.get_experiment_by_name("killed")
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert len(parents) == 1, "resume continues the same parent run"
    runs = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    logged = [r.data.tags["servetune.trial_id"] for r in runs if r.data.tags.get("servetune.kind") == "trial"]
    assert sorted(logged) == sorted(after), "one MLflow run per trial in trials.parquet, no more, no less"
    assert wait_gone(logged_pids(out)) == [] and pids_running(tag) == []
