"""Deferred MLflow logging (`--tracking deferred`): a study whose tracking server is out of reach keeps
its records in the output folder, and `--log-only` logs them later with the live mode's run structure and
redaction, once (running it again duplicates nothing). Real MLflow SQLite stores, real local executor."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import run_cli, small_study
from tuner.trial.table import read_trials

pytestmark = pytest.mark.slow
HF = "hf_DeFeRrEdToKeN0123456789"


def runs(db: Path) -> dict[str, dict[str, set[str]]]:
    """kind (study/trial) -> {"tags": tag keys, "params": param keys, "ids": trial ids, "runs": run ids}."""
    out: dict[str, dict[str, set[str]]] = {}
    with sqlite3.connect(db) as con:
        for (run,) in con.execute("select run_uuid from runs where lifecycle_stage = 'active'"):
            tags = dict(con.execute("select key, value from tags where run_uuid = ?", (run,)).fetchall())
            params = {k for (k,) in con.execute("select key from params where run_uuid = ?", (run,))}
            kind = out.setdefault(tags.get("servetune.kind", "?"), {"tags": set(), "params": set(), "ids": set(),
                                                                    "runs": set()})
            kind["tags"] |= {k for k in tags if not k.startswith("mlflow.") or k == "mlflow.parentRunId"}
            kind["params"] |= params
            kind["runs"].add(run)
            if "servetune.trial_id" in tags:
                kind["ids"].add(tags["servetune.trial_id"])
    return out


def test_deferred_study_logs_later_like_live_and_only_once(tmp_path: Path) -> None:
    study = small_study(tmp_path, budget={"trials": 2, "max_concurrent": 2}, promotion={"enabled": False},
                        engines={"vllm": {"env": {"HF_TOKEN": HF}}})
    live = tmp_path / "live"
    proc = run_cli("--study", str(study), "--output", str(live), "--executor", "local")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    out = tmp_path / "deferred"  # the tracking server does not answer during the study
    proc = run_cli("--study", str(study), "--output", str(out), "--executor", "local", "--tracking", "deferred",
                   "--mlflow-uri", "http://127.0.0.1:9")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"--log-only {out}" in proc.stderr
    trials = read_trials(out / "trials.parquet")
    assert len(trials) == 2 and not any(t.mlflow_run_id for t in trials)
    assert (out / "pareto.json").exists() and (out / "report.html").exists()

    store = tmp_path / "later" / "mlflow.db"
    store.parent.mkdir()
    for attempt in range(2):
        proc = run_cli("--log-only", str(out), "--mlflow-uri", f"sqlite:///{store}")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert f"logged {2 if attempt == 0 else 0} trial(s)" in proc.stdout, proc.stdout
    got, want = runs(store), runs(live / "mlflow.db")
    assert len(got["study"]["runs"]) == 1 and len(got["trial"]["runs"]) == 2, "no run logged twice"
    assert got["trial"]["ids"] == {t.trial_id for t in trials}
    assert {t.mlflow_run_id for t in read_trials(out / "trials.parquet")} == got["trial"]["runs"]
    for kind in ("study", "trial"):  # the live mode's structure: same tags and params on each kind of run
        assert got[kind]["params"] == want[kind]["params"], kind
        assert got[kind]["tags"] - {"servetune.folder_id", "servetune.study_logged"} == want[kind]["tags"], kind
    with sqlite3.connect(store) as con:
        status = dict(con.execute("select t.value, r.status from runs r join tags t on t.run_uuid = r.run_uuid "
                                  "where t.key = 'servetune.kind'").fetchall())
    assert status == {"study": "FINISHED", "trial": "FINISHED"}
    leaked = [p for p in [*out.rglob("*"), *store.parent.rglob("*")] if p.is_file() and HF.encode() in p.read_bytes()]
    assert leaked == [], leaked  # the study file's token is masked in the folder and in MLflow


def test_resumed_deferred_study_logs_only_the_new_trials(tmp_path: Path) -> None:
    """A deferred study logged once, then resumed with a larger budget: the next `--log-only` adds the new
    trials as children of the same study run and leaves the logged ones alone."""
    study = small_study(tmp_path, budget={"trials": 2, "max_concurrent": 1}, promotion={"enabled": False})
    out, store = tmp_path / "deferred", tmp_path / "later" / "mlflow.db"
    store.parent.mkdir()
    off = ("--mlflow-uri", "http://127.0.0.1:9")
    proc = run_cli("--study", str(study), "--output", str(out), "--executor", "local", "--tracking", "deferred", *off)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-3000:]
    proc = run_cli("--log-only", str(out), "--mlflow-uri", f"sqlite:///{store}")
    assert proc.returncode == 0 and "logged 2 trial(s)" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    first = {t.trial_id: t.mlflow_run_id for t in read_trials(out / "trials.parquet")}

    proc = run_cli("--study", str(study), "--output", str(out), "--executor", "local", "--tracking", "deferred",
                   "--resume", "--trials", "3", *off)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-3000:]
    trials = read_trials(out / "trials.parquet")
    assert len(trials) == 3, [t.number for t in trials]
    assert {t.trial_id: t.mlflow_run_id for t in trials if t.trial_id in first} == first, "logged ids kept"
    proc = run_cli("--log-only", str(out), "--mlflow-uri", f"sqlite:///{store}")
    assert proc.returncode == 0 and "logged 1 trial(s)" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    got = runs(store)
    assert len(got["study"]["runs"]) == 1 and len(got["trial"]["runs"]) == 3, "one study run, no trial twice"
    assert got["trial"]["ids"] == {t.trial_id for t in trials}
    with sqlite3.connect(store) as con:
        parents = {v for (v,) in con.execute("select value from tags where key = 'mlflow.parentRunId'")}
    assert parents == got["study"]["runs"], "the new trial hangs under the same study run"
