"""Hand-built studies and trials for promotion tests (the sim engine, vLLM-flavour args)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from mlflow import MlflowClient

from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

SLA = ["p99_ttft_ms <= 500", "p99_e2el_ms <= 20000"]


def study_data(name: str = "promo", **changes: Any) -> dict[str, Any]:
    """A study file's content (what `python -m tuner.run` logs as the study artifact)."""
    data: dict[str, Any] = {
        "name": name,
        "engine": "sim",
        "sim": {"flavour": "vllm", "gpu": "H200", "mode": "server", "time_scale": 50.0},
        "model": {"name": "Qwen/Qwen3-8B", "served_name": "qwen3-8b", "max_model_len": 8192},
        "workload": {"profile": "dynamic"},
        "sla": SLA,
        "promotion": {"confirm_runs": 2, "top_k": 2},
        "resources": {"cpus_per_trial": 0.25},
    }
    data.update(changes)
    return data


def make_study(name: str = "promo", **changes: Any) -> Study:
    return Study.model_validate(study_data(name, **changes))


def make_trial(number: int, objective: float | None, ttft_p99: float, *, max_num_seqs: int = 64,
               outcome: TrialOutcome = TrialOutcome.OK, capacity: float | None = 8.0, seed: int = 0,
               run_id: str | None = None, e2e_p99: float = 9000.0, baseline: bool = False) -> TrialResult:
    ok = outcome == TrialOutcome.OK
    metrics = {"output_throughput": objective, "p99_ttft_ms": ttft_p99, "p99_e2el_ms": e2e_p99,
               "mean_e2el_ms": 4000.0, "error_rate": 0.0} if objective is not None else {}
    return TrialResult(
        trial_id=f"t{number:03d}", number=number, engine="sim",
        params={"max_num_seqs": max_num_seqs}, args={"max_num_seqs": max_num_seqs, "block_size": 16},
        outcome=outcome, reason="" if ok else "engine said no", capacity=capacity if ok else None,
        objective=objective if ok else None, metrics=metrics if ok or outcome.ran else {},
        seed=seed, mlflow_run_id=run_id, baseline=baseline,
    )


def rerun(trial: TrialResult, seed: int, objective: float | None, *, ttft_p99: float | None = None,
          outcome: TrialOutcome = TrialOutcome.OK) -> TrialResult:
    """What a confirmation run returns: the same args, another seed, its own measurements."""
    again = make_trial(trial.number, objective, ttft_p99 if ttft_p99 is not None else trial.metrics["p99_ttft_ms"],
                       max_num_seqs=trial.args["max_num_seqs"], outcome=outcome, seed=seed,
                       capacity=(trial.capacity or 1.0) * 0.9, baseline=trial.baseline)
    return again


def finished_study_run(uri: str, tmp: Path, name: str, trials: list[TrialResult], **changes: Any) -> tuple[str, str]:
    """A finished study as the pipeline leaves it in MLflow: a parent run with trials.parquet and
    study.yaml, and a child run tagged with the first trial's id. Returns (parent run, that child run)."""
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else client.create_experiment(name)
    parent = client.create_run(exp_id, tags={"servetune.kind": "study"}).info.run_id
    kid = client.create_run(exp_id, tags={"mlflow.parentRunId": parent, "servetune.kind": "trial",
                                          "servetune.trial_id": trials[0].trial_id}).info.run_id
    folder = tmp / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(yaml.safe_dump(study_data(name, **changes)))
    pq.write_table(pa.Table.from_pylist([t.to_row() for t in trials]), folder / "trials.parquet")
    client.log_artifact(parent, str(folder / "study.yaml"))
    client.log_artifact(parent, str(folder / "trials.parquet"))
    client.set_terminated(parent)
    return parent, kid
