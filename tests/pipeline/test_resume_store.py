"""--resume logs to the MLflow store the study started in: the command printed on Ctrl-C names no URI.

A real `mlflow server` process, real local Ray, real sim trials.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, small_study
from tests.reliability.mlflow_server import MlflowServer

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    srv = MlflowServer(tmp_path / "mlflow").start()
    try:
        yield srv.uri
    finally:
        srv.stop()


def test_resume_without_mlflow_uri_continues_in_the_server_the_study_started_in(tmp_path: Path, server: str) -> None:
    """Seen in the audit: after Ctrl-C of a study on `--mlflow-uri http://...`, the printed
    `--resume` command opened a new SQLite store in the output folder and died on 'Run ... not found' (exit 1)."""
    study = small_study(tmp_path, name="remote-resume", budget={"trials": 1, "max_concurrent": 1},
                        promotion={"enabled": False})
    out = tmp_path / "out"
    with_password = server.replace("http://", "http://alice:pw-not-stored@")
    first = run_cli("--study", str(study), "--output", str(out), "--mlflow-uri", with_password)
    assert first.returncode == 0, first.stdout + first.stderr
    state = json.loads((out / "state.json").read_text())
    assert state["tracking_uri"] == server

    again = run_cli("--study", str(study), "--output", str(out), "--resume", "--trials", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert not (out / "mlflow.db").exists(), "resume opened a store of its own instead of the study's server"
    client = MlflowClient(tracking_uri=server)
    exp = client.get_experiment_by_name("remote-resume")
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert len(parents) == 1 and parents[0].info.run_id == state["parent_run_id"]
    assert parents[0].info.status == "FINISHED"
    kids = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{state['parent_run_id']}'")
    assert len([k for k in kids if k.data.tags.get("servetune.kind") == "trial"]) == 2

    other = run_cli("--study", str(study), "--output", str(out), "--resume", "--trials", "3",
                    "--mlflow-uri", f"sqlite:///{tmp_path / 'other.db'}")
    assert other.returncode == 2, other.stdout + other.stderr
    assert f"parent run {state['parent_run_id']} is not in" in other.stderr and "Traceback" not in other.stderr
    assert f"--mlflow-uri {server}" in other.stderr
