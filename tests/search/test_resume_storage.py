"""The Optuna study persists in optuna.db and a resumed searcher continues from it.

Unit level (a real SQLite Optuna storage, no engine): a driver stopped with one trial recorded but not
told, one never finished and one crash only Optuna heard of comes back with every trial told once, the
unfinished config launched again first, and numbering continuing. End to end (`python -m tuner.run`):
4 trials, then `--resume --trials 6` runs exactly 2 more, and trials.parquet, the MLflow child runs and
Optuna's own view agree trial by trial.
"""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_cli, small_study
from tests.search.helpers import make_study, synthetic
from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.search.attrs import A_INTERRUPTED, A_NUMBER, A_TRIAL_ID
from tuner.search.resume import open_storage, storage_url
from tuner.search.searcher import SearchCore
from tuner.search.space import build_space
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

_RAY = {"RAY_raylet_start_wait_time_s": "180"}  # a busy machine starts Ray slowly


def _result(cfg: Suggestion, res: TrialReport, trial_id: str) -> TrialResult:
    return TrialResult(trial_id=trial_id, number=cfg.number, engine=cfg.engine, params=cfg.params,
                       args=cfg.args, outcome=res.outcome, objective=res.objective, capacity=res.capacity,
                       reason=res.reason, baseline=cfg.baseline,
                       metrics={"p99_ttft_ms": 500.0, "p99_e2el_ms": 1000.0} if res.objective else {})


def _numbered(study: optuna.Study) -> dict[int, optuna.trial.FrozenTrial]:
    return {t.user_attrs[A_NUMBER]: t for t in study.get_trials()
            if A_NUMBER in t.user_attrs and not t.user_attrs.get(A_INTERRUPTED)}


def test_resume_continues_from_optuna_storage(tmp_path: Path) -> None:
    study = make_study(name="stored")
    space = build_space(study)
    first = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=True))
    cfgs = [first.ask() for _ in range(5)]
    assert all(cfgs)
    for c in cfgs:
        first.bind(c.number, f"tune-{c.number}")
    done: list[TrialResult] = []
    for c in cfgs[:2]:  # finished normally: recorded, then told
        res = synthetic(space, c)
        done.append(_result(c, res, f"tune-{c.number}"))
        first.tell(c.number, res)
    # cfgs[2]: recorded in trials.parquet, driver stopped before Optuna was told
    done.append(_result(cfgs[2], synthetic(space, cfgs[2]), "tune-2"))
    # cfgs[3]: an actor crash Optuna was told of, trials.parquet never written
    first.tell(cfgs[3].number, TrialReport.failed(TrialOutcome.CRASHED, "trial actor failed"))
    # cfgs[4]: still running when the driver died
    running_params = dict(first._trials[4].params)

    again = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=False))
    recovered = again.resume(done)
    assert [(t.number, t.trial_id, t.outcome) for t in recovered] == [(3, "tune-3", TrialOutcome.CRASHED)]
    view = _numbered(again.optuna)
    assert sorted(view) == [0, 1, 2, 3], "the unfinished trial no longer counts"
    assert all(t.state.is_finished() for t in again.optuna.get_trials())
    told = optuna.trial.TrialState.COMPLETE if done[2].outcome.ran else optuna.trial.TrialState.FAIL
    assert view[2].state == told and view[2].user_attrs[A_TRIAL_ID] == "tune-2"
    assert view[2].user_attrs["servetune.outcome"] == done[2].outcome.value
    assert view[3].state == optuna.trial.TrialState.FAIL
    assert [h["number"] for h in again.history] == [0, 1, 2, 3]
    nxt = again.ask()
    assert nxt is not None and nxt.number == 4, "numbering continues after the last finished trial"
    assert again._trials[4].params == running_params, "the interrupted config runs again first"
    assert sum(1 for t in again.optuna.get_trials() if t.user_attrs.get(A_INTERRUPTED)) == 1


def test_an_interrupted_trial_below_a_finished_one_gets_its_number_back(tmp_path: Path) -> None:
    """Ctrl-C while the baseline (0) still ran but trial 1 had finished: the re-run baseline is number 0
    again, not 2 (fresh-clone CI on e26bece saw numbers [1, 2, 3, 4] after such a resume)."""
    study = make_study(name="gap")
    space = build_space(study)
    first = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=True))
    cfgs = [first.ask() for _ in range(2)]
    assert all(cfgs) and cfgs[0] is not None and cfgs[0].baseline
    for c in cfgs:
        first.bind(c.number, f"tune-{c.number}")
    res = synthetic(space, cfgs[1])
    done = [_result(cfgs[1], res, "tune-1")]
    first.tell(1, res)

    again = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=False))
    again.resume(done)
    nxt = again.ask()
    assert nxt is not None and nxt.number == 0 and nxt.baseline, (nxt and nxt.number)
    later = again.ask()
    assert later is not None and later.number == 2


def test_resume_of_a_folder_without_optuna_db(tmp_path: Path) -> None:
    """An output folder from before optuna.db: its finished trials become the stored study's first trials."""
    study = make_study(name="old")
    space = build_space(study)
    mem = SearchCore(study, space)
    done = []
    for i in range(3):
        c = mem.ask()
        res = synthetic(space, c)
        done.append(_result(c, res, f"old-{i}"))
        mem.tell(c.number, res)
    core = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=False))
    assert core.resume(done) == []
    view = _numbered(core.optuna)
    assert sorted(view) == [0, 1, 2] and view[0].user_attrs["servetune.baseline"] is True
    assert {view[i].user_attrs[A_TRIAL_ID] for i in view} == {"old-0", "old-1", "old-2"}
    assert core.ask().number == 3


@pytest.mark.slow
def test_four_then_resume_to_six_runs_exactly_two_more(tmp_path: Path) -> None:
    study = small_study(tmp_path, name="resume6", promotion={"enabled": False})
    out = tmp_path / "out"
    first = run_cli("--study", str(study), "--output", str(out), "--trials", "4", timeout=600, env=_RAY)
    assert first.returncode in (0, 3), first.stdout[-2000:] + first.stderr[-3000:]
    before = {r["trial_id"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    assert len(before) == 4 and (out / "optuna.db").exists()

    second = run_cli("--study", str(study), "--output", str(out), "--trials", "6", "--resume", timeout=600,
                     env=_RAY)
    log = second.stdout + second.stderr
    assert second.returncode in (0, 3), log[-5000:]
    started = re.findall(r"^\[servetune\] trial (\S+) started", second.stdout, flags=re.M)
    assert len(started) == 2 and not set(started) & set(before), started

    rows = {r["trial_id"]: r for r in pq.read_table(out / "trials.parquet").to_pylist()}
    assert len(rows) == 6 and sorted(r["number"] for r in rows.values()) == list(range(6))
    for tid, row in before.items():
        assert rows[tid]["params_json"] == row["params_json"] and rows[tid]["objective"] == row["objective"]
    assert set(started) == set(rows) - set(before)

    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    exp = client.get_experiment_by_name("resume6")
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert len(parents) == 1
    children = [r for r in client.search_runs([exp.experiment_id],
                                              f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
                if r.data.tags.get("servetune.kind") == "trial"]
    assert sorted(r.data.tags["servetune.trial_id"] for r in children) == sorted(rows)
    assert {r["mlflow_run_id"] for r in rows.values()} == {r.info.run_id for r in children}

    ostudy = optuna.load_study(study_name="resume6", storage=storage_url(out))
    assert not [t for t in ostudy.get_trials() if not t.state.is_finished()], "no orphan RUNNING trial"
    view = _numbered(ostudy)
    assert sorted(view) == list(range(6)), "one Optuna trial per servetune trial, none repeated"
    for row in rows.values():
        ft = view[row["number"]]
        assert ft.user_attrs[A_TRIAL_ID] == row["trial_id"]
        if row["outcome"] == "ok":
            assert ft.state == optuna.trial.TrialState.COMPLETE and ft.value == pytest.approx(row["objective"])
        elif row["outcome"] == "sla_violated":
            assert ft.state == optuna.trial.TrialState.COMPLETE
        else:
            assert ft.state == optuna.trial.TrialState.FAIL
