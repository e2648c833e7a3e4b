"""A short real study on vLLM's CPU build, end to end: trials, MLflow records, a promoted config."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli
from tests.engines.conftest import find_vllm_cpu_env

pytestmark = [pytest.mark.slow, pytest.mark.vllm_cpu]


def test_real_vllm_study_end_to_end(tmp_path: Path) -> None:
    found = find_vllm_cpu_env()
    if isinstance(found, str):
        pytest.skip(found)
    out = tmp_path / "out"
    proc = run_cli("--study", str(ROOT / "studies" / "vllm-cpu.yaml"), "--output", str(out), timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) >= 3 and rows[0]["baseline"]
    ran = [r for r in rows if r["outcome"] == "ok"]
    assert ran, [(r["outcome"], r["reason"]) for r in rows]
    for r in ran:
        assert r["start_s"] and r["start_s"] > 1, "a real engine start is measured"
        assert Path(r["log_path"]).read_text(errors="replace"), "the engine log is kept"
    failed = [r for r in rows if r["outcome"] not in ("ok", "sla_violated")]
    assert all(r["reason"] and r["objective"] is None for r in failed)
    assert (out / "promoted.yaml").exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    version = client.get_model_version_by_alias("vllm-cpu-config", "staging")
    assert version.tags["servetune.engine"] == "vllm"
