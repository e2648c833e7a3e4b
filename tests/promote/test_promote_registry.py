"""promote_study against a real MLflow store (SQLite): registration, lineage, aliases, promoted.yaml."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from promote_factory import finished_study_run, make_study, make_trial, rerun
from ray.serve.schema import ServeDeploySchema

from serve_apps.args import AppArgs
from tuner.promote import promote_study
from tuner.promote.__main__ import main
from tuner.promote.registry import PREVIOUS, REPLACED_TAG, STAGING, ConfigRegistry
from tuner.trial.outcome import TrialOutcome


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, MlflowClient]:
    """One store for the module (creating an MLflow database takes seconds); each test its own study."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    return uri, MlflowClient(tracking_uri=uri, registry_uri=uri)


def _study_run(client: MlflowClient, name: str, n_trials: int) -> tuple[str, list[str]]:
    """A parent study run with one child run per trial, as the pipeline makes them."""
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else client.create_experiment(name)
    parent = client.create_run(exp_id, tags={"servetune.kind": "study"}).info.run_id
    kids = [client.create_run(exp_id, tags={"mlflow.parentRunId": parent, "servetune.kind": "trial",
                                            "servetune.trial_id": f"t{i:03d}"}).info.run_id
            for i in range(n_trials)]
    return parent, kids


def test_winner_is_registered_with_lineage_and_a_valid_serve_config(tmp_path: Path, store) -> None:
    uri, client = store
    study = make_study(promotion={"confirm_runs": 2, "top_k": 2, "app_name": "staging", "route_prefix": "/"})
    parent, kids = _study_run(client, study.name, 3)
    trials = [make_trial(0, 3000, 300, max_num_seqs=256, run_id=kids[0]),
              make_trial(1, 2500, 250, max_num_seqs=64, run_id=kids[1]),
              make_trial(2, 9000, 900, max_num_seqs=512, run_id=kids[2])]  # violates the SLA
    result = promote_study(study, trials, output_dir=tmp_path / "out", tracking_uri=uri, parent_run_id=parent,
                           confirm=lambda t, s: rerun(t, s, 2000 if t.number == 0 else 2400))
    assert result.promoted and result.trial is not None and result.trial.trial_id == "t001"
    assert result.worst_objective == pytest.approx(2400) and len(result.confirmations) == 2
    assert result.model_name == "promo-config" and result.model_version == "1"

    mv = client.get_model_version_by_alias("promo-config", STAGING)
    assert str(mv.version) == "1" and mv.run_id == result.run_id  # the run holding the version's files
    tags = mv.tags
    assert tags["servetune.study_run_id"] == parent and tags["servetune.trial_run_id"] == kids[1]
    assert json.loads(tags["servetune.args"]) == {"max_num_seqs": 64, "block_size": 16}
    assert tags["servetune.sla"] == "p99_ttft_ms <= 500, p99_e2el_ms <= 20000"
    assert json.loads(tags["servetune.workload"])["profile"] == "dynamic"
    assert tags["servetune.hardware"] == "sim:vllm:H200"
    assert float(tags["servetune.capacity"]) == pytest.approx(8.0 * 0.9)  # worst run's capacity
    promo_run = client.get_run(result.run_id)
    assert promo_run.data.tags["mlflow.parentRunId"] == parent
    assert promo_run.data.params["max_num_seqs"] == "64"

    config = yaml.safe_load(result.serve_config.read_text())
    ServeDeploySchema.model_validate(config)  # what `serve deploy` accepts
    app = config["applications"][0]
    assert (app["name"], app["route_prefix"], app["import_path"]) == ("staging", "/", "serve_apps.sim:build_app")
    args = AppArgs.model_validate(app["args"])
    assert args.engine_args == {"max_num_seqs": 64, "block_size": 16}
    assert args.lineage["model_version"] == "1" and args.lineage["trial_run_id"] == kids[1]
    held = 8.0 * 0.9 * 4000.0 / 1000.0  # Little's law: worst capacity x mean e2e
    assert args.deployment.autoscaling_config.target_ongoing_requests == pytest.approx(held, rel=0.01)
    assert args.deployment.max_ongoing_requests == math.ceil(held * 1.25)

    folder = ConfigRegistry(uri).download(mv, tmp_path / "dl")
    assert yaml.safe_load((folder / "promoted.yaml").read_text()) == config
    # a hand edit that YAML reads as a number but no deployment can use is refused with the key
    for key, bad in (("max_ongoing_requests", True), ("health_check_period_s", float("inf"))):
        edited = {**app["args"], "deployment": {**app["args"]["deployment"], key: bad}}
        with pytest.raises(ValueError, match=key):
            AppArgs.model_validate(edited)


def test_the_replaced_version_keeps_previous_staging_and_rollback_steps_back(tmp_path: Path, store) -> None:
    uri, client = store
    study = make_study("twice", promotion={"confirm_runs": 0, "top_k": 1})
    for i, seqs in enumerate((64, 128)):
        parent, kids = _study_run(client, study.name, 1)
        result = promote_study(study, [make_trial(0, 1000 + i, 200, max_num_seqs=seqs, run_id=kids[0])],
                               output_dir=tmp_path / f"out{i}", tracking_uri=uri, parent_run_id=parent,
                               confirm=None)
        assert result.model_version == str(i + 1)
    assert str(client.get_model_version_by_alias("twice-config", STAGING).version) == "2"
    assert str(client.get_model_version_by_alias("twice-config", PREVIOUS).version) == "1"
    assert client.get_model_version("twice-config", "2").tags[REPLACED_TAG] == "1"

    registry = ConfigRegistry(uri)
    current, previous = registry.rollback_target("twice-config")
    registry.rolled_back("twice-config", current, previous)
    assert str(client.get_model_version_by_alias("twice-config", STAGING).version) == "1"
    assert registry.version("twice-config", PREVIOUS) is None  # nothing older than version 1
    assert client.get_model_version("twice-config", "2").tags["servetune.rolled_back"] == "true"


def test_nothing_promoted_registers_nothing_and_records_why(tmp_path: Path, store) -> None:
    uri, client = store
    study = make_study("none")
    parent, _ = _study_run(client, study.name, 0)
    trials = [make_trial(0, None, 0, outcome=TrialOutcome.OOM), make_trial(1, 4000, 950)]
    result = promote_study(study, trials, output_dir=tmp_path / "out", tracking_uri=uri, parent_run_id=parent,
                           confirm=None)
    assert not result.promoted and result.model_version is None and result.serve_config is None
    assert "nothing promoted" in result.reason
    assert not client.search_registered_models("name = 'none-config'")
    assert not (tmp_path / "out" / "promoted.yaml").exists()
    assert json.loads((tmp_path / "out" / "promotion.json").read_text())["reason"] == result.reason
    assert client.get_run(result.run_id).data.tags["servetune.promoted"] == "false"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`python -m tuner.promote ARGS` in this process (its main(), as the module runs it)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_bad_input_exits_2_with_what_where_fix(store, capsys, monkeypatch) -> None:
    uri, client = store
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code, _, err = _cli(capsys, "--study-run", "0123456789abcdef", "--mlflow-uri", uri)
    assert code == 2 and "--study-run" in err and "no MLflow run" in err
    trial_run = client.create_run(client.create_experiment("lonely")).info.run_id
    code, _, err = _cli(capsys, "--study-run", trial_run, "--mlflow-uri", uri)
    assert code == 2 and "no trials.parquet" in err
    code, _, err = _cli(capsys, "--rollback", "promo-config", "--mlflow-uri", uri)  # nothing to go back to
    assert code == 2 and "previous-staging" in err and "fix:" in err
    code, _, err = _cli(capsys, "--rollback", "promo-config")
    assert code == 2 and "MLFLOW_TRACKING_URI" in err


def test_cli_study_run_with_nothing_feasible_exits_3_and_says_why(store, tmp_path: Path, capsys) -> None:
    uri, _ = store
    study_run, _ = finished_study_run(uri, tmp_path, "hopeless", [
        make_trial(0, None, 0, outcome=TrialOutcome.OOM), make_trial(1, 4000, 2000)])
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--output", str(tmp_path / "out"))
    assert code == 3, out + err
    assert "nothing promoted" in out and "oom" in out
    assert not (tmp_path / "out" / "promoted.yaml").exists()


def test_cli_trial_registers_the_named_trial_apart_from_the_selected_winner(store, tmp_path: Path, capsys) -> None:
    """--trial baseline: a known-good version (the defaults) to deploy first, so a later rollback has a
    previous one; the study run's selected winner is still found and registered on its own."""
    uri, client = store
    study_run, _ = finished_study_run(uri, tmp_path, "picked", [
        make_trial(0, 2000, 200, max_num_seqs=32, baseline=True), make_trial(1, 3000, 300, max_num_seqs=96)],
        promotion={"confirm_runs": 0, "top_k": 1})
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--trial", "baseline",
                          "--output", str(tmp_path / "b"))
    assert code == 0, out + err
    base = client.get_model_version("picked-config", "1")
    assert base.tags["servetune.trial_id"] == "t000" and base.tags["servetune.picked_trial"] == "t000"
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--output", str(tmp_path / "w"))
    assert code == 0 and "promoted already" not in out, out + err  # the picked version is not the winner's
    assert client.get_model_version("picked-config", "2").tags["servetune.trial_id"] == "t001"
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--trial", "baseline")
    assert code == 0 and "promoted already: picked-config version 1" in out, out + err
    # asked again with --output (as scripts/h200/failover_demo.sh does): the registered files land there; they
    # used to be missing while the command said exit 0
    again = tmp_path / "b-again"
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--trial", "baseline",
                          "--output", str(again))
    assert code == 0 and "promoted already: picked-config version 1" in out, out + err
    assert (again / "promoted.yaml").read_text() == (tmp_path / "b" / "promoted.yaml").read_text()
    assert json.loads((again / "promotion.json").read_text())["trial_id"] == "t000"
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--trial", "t999")
    assert code == 2 and "no trial 't999'" in err and "t000 (baseline)" in err, err
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--canary-seconds", "5")
    assert code == 2 and "--deploy" in err, err


def test_cli_no_alias_registers_a_trial_without_moving_staging(store, tmp_path: Path, capsys) -> None:
    """--no-alias (a failover side): the version and promoted.yaml exist, staging still names the winner."""
    uri, client = store
    study_run, _ = finished_study_run(uri, tmp_path, "sides", [
        make_trial(0, 2000, 200, max_num_seqs=32, baseline=True), make_trial(1, 3000, 300, max_num_seqs=96)],
        promotion={"confirm_runs": 0, "top_k": 1})
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--output", str(tmp_path / "w"))
    assert code == 0, out + err
    assert str(client.get_model_version_by_alias("sides-config", "staging").version) == "1"
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--trial", "baseline", "--no-alias",
                          "--output", str(tmp_path / "side"))
    assert code == 0, out + err
    assert (tmp_path / "side" / "promoted.yaml").exists()
    assert client.get_model_version("sides-config", "2").tags["servetune.trial_id"] == "t000"
    assert str(client.get_model_version_by_alias("sides-config", "staging").version) == "1"  # not moved to 2
    code, out, err = _cli(capsys, "--study-run", study_run, "--mlflow-uri", uri, "--trial", "t001", "--no-alias",
                          "--deploy")
    assert code == 2 and "--no-alias" in err and "staging" in err, err
