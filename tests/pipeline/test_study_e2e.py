"""The default study, shortened, end to end on a real local Ray cluster and a real MLflow store."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, small_study

pytestmark = pytest.mark.slow


def _check_outputs(out: Path, uri: str, study: str, n_trials: int) -> None:
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) == n_trials
    assert rows[0]["number"] == 0 and rows[0]["baseline"], "trial 0 is the engine-default baseline"
    pareto = json.loads((out / "pareto.json").read_text())
    assert pareto["front"], "at least one trial served load"
    promoted = yaml.safe_load((out / "promoted.yaml").read_text())
    assert promoted["applications"][0]["name"] == "staging"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(study)
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert len(parents) == 1
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    trial_runs = [c for c in children if c.data.tags.get("servetune.kind") == "trial"]
    assert len(trial_runs) == n_trials
    assert {"output_throughput", "p99_ttft_ms"} <= set(trial_runs[0].data.metrics) or any(
        "output_throughput" in c.data.metrics for c in trial_runs)
    names = {c.data.tags["servetune.trial_id"] for c in trial_runs}
    assert names == {r["trial_id"] for r in rows}
    version = client.get_model_version_by_alias(f"{study}-config", "staging")
    assert version.tags["servetune.trial_id"] in names
    promotion_run = client.get_run(version.run_id)
    assert promotion_run.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id


def test_default_study_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("--study", str(small_study(tmp_path, name="e2e")), "--output", str(out), "--trials", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MLflow UI" in proc.stdout and str(out) in proc.stdout
    _check_outputs(out, f"sqlite:///{out / 'mlflow.db'}", "e2e", 4)


def test_failed_trials_are_recorded_and_the_study_goes_on(tmp_path: Path) -> None:
    """Qwen3-32B weights (~65 GB) do not fit in 45% of an H200: searched trials fail (oom); the baseline runs."""
    path = small_study(tmp_path, name="fails", search_space={
        "overrides": {"gpu_memory_utilization": {"low": 0.2, "high": 0.45}},
        "exclude": ["block_size", "scheduling_policy", "max_num_partial_prefills"],
    }, model={"name": "Qwen/Qwen3-32B", "max_model_len": 16384}, search={"n_startup_trials": 8})
    out = tmp_path / "out"
    proc = run_cli("--study", str(path), "--output", str(out), "--trials", "4", "--no-promote")
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) >= 2, proc.stdout + proc.stderr
    failed = [r for r in rows if r["outcome"] in ("oom", "start_failed")]
    ran = [r for r in rows if r["outcome"] in ("ok", "sla_violated")]
    assert failed and ran, rows
    assert all(r["reason"] for r in failed)
    assert all(r["objective"] is None for r in failed), "a failed trial is never a fake zero"
    assert proc.returncode in (0, 3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_study_logs_to_a_real_mlflow_server(tmp_path: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(uri + "/health", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(1)
        out = tmp_path / "out"
        proc = run_cli("--study", str(small_study(tmp_path, name="remote")), "--output", str(out),
                       "--mlflow-uri", uri)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not (out / "mlflow.db").exists(), "the remote server is the store, not a local file"
        _check_outputs(out, uri, "remote", 3)
    finally:
        import os
        import signal

        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_unreachable_mlflow_uri_is_bad_input(tmp_path: Path) -> None:
    proc = run_cli("--study", str(small_study(tmp_path)), "--output", str(tmp_path / "o"),
                   "--mlflow-uri", f"http://127.0.0.1:{_free_port()}")
    assert proc.returncode == 2
    assert "unreachable" in proc.stderr
