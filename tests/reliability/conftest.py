"""Fixtures shared by the reliability tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store with its tables made once (creating them takes seconds); copy it per test."""
    from mlflow.tracking import MlflowClient

    from tuner.tracking.mlflow_log import default_uri

    d = tmp_path_factory.mktemp("store")
    MlflowClient(tracking_uri=default_uri(d)).search_experiments()
    return d / "mlflow.db"
