"""A tracking server that enforces credentials (MLflow's basic-auth app): found before any engine starts.

Its /health answers without credentials, so a run without them (a --resume: state.json keeps the URI without
its credentials) used to pass the start checks and fail at the first logged run with a bare "HTTP 401"."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli, small_study
from tests.reliability.mlflow_server import MlflowServer
from tuner.common.errors import SpecError
from tuner.tracking.credentials import ENV_KEYS
from tuner.tracking.mlflow_log import check_uri

PW = "s3cret-admin-pw-2026"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    srv = MlflowServer(tmp_path_factory.mktemp("mlflow-auth"), admin_password=PW).start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def no_env_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)


def test_missing_or_wrong_credentials_are_named(server: MlflowServer) -> None:
    host = server.uri.removeprefix("http://")
    with pytest.raises(SpecError, match=r"needs credentials and none were given \(HTTP 401\)") as none:
        check_uri(server.uri)
    assert "MLFLOW_TRACKING_USERNAME" in str(none.value) and "--resume" in str(none.value)
    with pytest.raises(SpecError, match=r"refused the credentials given \(HTTP 401\)") as wrong:
        check_uri(f"http://admin:not-the-password@{host}")
    assert "not-the-password" not in str(wrong.value)


def test_credentials_in_the_uri_or_in_the_environment_pass(server: MlflowServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    check_uri(f"http://admin:{PW}@{server.uri.removeprefix('http://')}")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PW)
    check_uri(server.uri)  # how MLflow's client itself would be given them, and how a --resume gets them back


def test_the_cli_refuses_before_anything_starts(server: MlflowServer, tmp_path: Path) -> None:
    study = small_study(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    proc = run_cli("--study", str(study), "--output", str(tmp_path / "out"), "--mlflow-uri", server.uri,
                   "--dry-run", env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "needs credentials and none were given" in proc.stderr and "--mlflow-uri" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
