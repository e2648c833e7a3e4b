"""MLflow down for longer than its client's retry window, in the middle of a real study (real Ray, sim-server
trials, a real `mlflow server` process killed and restarted on the same port and store): trials keep
running and are kept in trials.parquet, nothing is promoted over the gap, the run ends with exit 4 naming
what MLflow misses, and `--resume` (MLflow back) logs exactly the missing trials: MLflow == trials.parquet."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from mlflow_server import MlflowServer
from relhelp import RAY_ENV, fault_study_data, pids_running

from tests.conftest import ROOT, run_cli
from tuner.common.atomic import read_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # two Ray starts on a busy CI box
TRIALS = 4


def rows(out: Path) -> list[dict]:
    p = out / "trials.parquet"
    return read_table(p).to_pylist() if p.exists() else []


def test_mlflow_outage_is_buffered_and_replayed(tmp_path: Path) -> None:
    server = MlflowServer(tmp_path / "mlflow").start()
    data = fault_study_data({}, name="outage", budget={"trials": TRIALS, "max_concurrent": 1},
                            promotion={"enabled": True, "confirm_runs": 0, "top_k": 1})
    tag = data["model"]["served_name"]
    study = tmp_path / "outage.yaml"
    study.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    args = ["--study", str(study), "--output", str(out), "--mlflow-uri", server.uri]
    log = tmp_path / "driver.log"
    try:
        with log.open("w") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "tuner.run", *args], cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV},
                                    stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 500
        while time.monotonic() < deadline and proc.poll() is None:
            if any(r["mlflow_run_id"] for r in rows(out)):
                break
            time.sleep(0.2)
        assert proc.poll() is None, log.read_text()[-3000:]
        server.stop()  # down until the study ends
        rc = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    text = log.read_text()
    assert rc == 4, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    first = rows(out)
    missing = [r["trial_id"] for r in first if not r["mlflow_run_id"]]
    assert len(first) == TRIALS and missing, "trials kept running through the outage, recorded locally"
    assert f"MLflow is missing {len(missing)} record(s)" in text and "--resume" in text, text[-2000:]
    assert "not promoting" in text and not (out / "promoted.yaml").exists()
    assert pids_running(tag) == []

    server.start()  # MLflow is back: --resume logs what it missed, runs no trial again
    again = run_cli(*args, "--resume", timeout=600, env=RAY_ENV)
    assert again.returncode in (0, 3), again.stderr[-3000:]
    after = rows(out)
    assert sorted(r["trial_id"] for r in after) == sorted(r["trial_id"] for r in first), "no trial re-run or lost"
    assert all(r["mlflow_run_id"] for r in after)
    client = MlflowClient(tracking_uri=server.uri)
    exp = client.get_experiment_by_name("outage")
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    trial_runs = [r for r in runs if r.data.tags.get("servetune.kind") == "trial"]
    assert sorted(r.data.tags["servetune.trial_id"] for r in trial_runs) == sorted(r["trial_id"] for r in after)
    assert {r.info.run_id for r in trial_runs} == {r["mlflow_run_id"] for r in after}
    server.stop()
