"""A second, fresh run over an output folder, and a study no config can meet: what the folder and MLflow say.

Real local Ray, real sim trials, the real SQLite MLflow store of the folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, small_study

pytestmark = pytest.mark.slow

ONE_TRIAL = {"budget": {"trials": 1, "max_concurrent": 1}, "promotion": {"confirm_runs": 0, "top_k": 1}}


def test_a_fresh_run_that_meets_no_sla_leaves_no_promotion_of_the_run_before(tmp_path: Path) -> None:
    """Seen in the audit: the second run's summary listed the first run's promoted.yaml, logged it to the new
    MLflow parent run, and promotion.json still said promoted: true, while no config met the new SLA."""
    out = tmp_path / "out"
    first = run_cli("--study", str(small_study(tmp_path, name="again", **ONE_TRIAL)), "--output", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    assert (out / "promoted.yaml").exists()

    never = small_study(tmp_path, name="again", sla=["p99_ttft_ms <= 1"], **ONE_TRIAL)
    proc = run_cli("--study", str(never), "--output", str(out))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "earlier run's trials.parquet" in proc.stderr
    assert not (out / "promoted.yaml").exists(), "the first run's promoted.yaml outlived a run that promoted nothing"
    promotion = json.loads((out / "promotion.json").read_text())
    assert promotion["promoted"] is False and promotion["trial_id"] is None
    assert "no trial met the SLA at any load" in promotion["reason"] and "closest: trial" in promotion["reason"]
    assert "nothing promoted: no trial met the SLA" in proc.stdout and "closest: trial" in proc.stdout
    assert "promote later" not in proc.stdout, "nothing is feasible: there is nothing to promote later"
    assert "promoted.yaml" not in proc.stdout
    assert json.loads((out / "pareto.json").read_text())["promoted_trial_id"] is None
    assert pq.read_table(out / "trials.parquet").num_rows == 1

    state = json.loads((out / "state.json").read_text())
    client = MlflowClient(tracking_uri=state["tracking_uri"])
    parent = client.get_run(state["parent_run_id"])
    kids = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    promo = [k for k in kids if k.data.tags.get("servetune.kind") == "promotion"]
    assert len(promo) == 1 and promo[0].data.tags["servetune.promoted"] == "false"
    assert "closest: trial" in promo[0].data.params["reason"]
    logged = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "promoted.yaml" not in logged and "trials.parquet" in logged


def test_resume_of_a_finished_study_keeps_its_promotion_and_a_new_trial_promotes_again(tmp_path: Path) -> None:
    """Seen in the audit: `--resume` of a finished study re-ran every confirmation and registered the same
    config as version 2 (staging moved to it, previous-staging the identical version 1)."""
    out = tmp_path / "out"
    study = small_study(tmp_path, name="finished", budget={"trials": 1, "max_concurrent": 1},
                        promotion={"confirm_runs": 1, "top_k": 1})
    first = run_cli("--study", str(study), "--output", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    before = json.loads((out / "promotion.json").read_text())
    promoted = (out / "promoted.yaml").read_text()

    again = run_cli("--study", str(study), "--output", str(out), "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing re-run" in again.stdout and "version 1" in again.stdout, again.stdout
    assert json.loads((out / "promotion.json").read_text()) == before
    assert (out / "promoted.yaml").read_text() == promoted
    assert json.loads((out / "pareto.json").read_text())["promoted_trial_id"] == before["trial_id"]
    state = json.loads((out / "state.json").read_text())
    client = MlflowClient(tracking_uri=state["tracking_uri"])
    assert [str(v.version) for v in client.search_model_versions("name = 'finished-config'")] == ["1"]

    more = run_cli("--study", str(study), "--output", str(out), "--resume", "--trials", "2")
    assert more.returncode == 0, more.stdout + more.stderr
    assert "nothing re-run" not in more.stdout
    after = json.loads((out / "promotion.json").read_text())
    assert after["run_id"] != before["run_id"] and len(after["trial_ids"]) == 2
    parent = client.get_run(state["parent_run_id"])
    kids = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert len([k for k in kids if k.data.tags.get("servetune.kind") == "promotion"]) == 2
