"""Engine faults in real trials: the sim server (a real process, real streaming HTTP) fails in each way an
engine does; the trial records an explicit outcome and reason, and no engine process outlives it.

Each fault's trial runs once (cached) and two tests read it: one for what must always hold (recorded,
no fake numbers, processes gone), one for the exact outcome and reason.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from relhelp import fault_study, logged_pids, pids_running, wait_gone

from tuner.common.errors import EngineStartError
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.trial.result import TrialResult
from tuner.trial.runner import TrialPlan, run_trial

# fault id -> (sim faults, outcome, reason pattern, known bug)
FAULTS: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "never-ready": ({"never_ready": True}, "timeout", r"no answer on /health within 6s", ""),
    "exits-during-start": ({"fail_at_start": True}, "start_failed",
                           r"engine exited \(exit 1\): RuntimeError: Engine core initialization failed", ""),
    "oom-at-start": ({"oom_at_start": True}, "oom", r"out of memory \(exit 1\): .*CUDA out of memory", ""),
    "crash-mid-load": ({"crash_after": 10}, "crashed", r"died under load: .*EngineDeadError", ""),
    "hang": ({"hang_after": 10}, "timeout", r"(hung|no token|timed? ?out).*error_rate|error_rate.*(hung|timed? ?out)",
             ""),
    "stalled-stream": ({"stall_after": 10}, "sla_violated", r"error_rate = 0\.\d+", ""),
    "http-5xx": ({"http500_rate": 0.3}, "sla_violated", r"error_rate = 0\.\d+", ""),
}


class Runs:
    """Each fault's trial, run once on first use: (result, trial folder, the tag in its engine's argv)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, tuple[TrialResult, Path, str]] = {}

    def __call__(self, fault: str) -> tuple[TrialResult, Path, str]:
        if fault not in self.done:
            study = fault_study(FAULTS[fault][0])
            tag = study.model.client_name
            tdir = self.root / fault
            result = run_trial(study, TrialPlan(trial_id=tag, number=0, engine="sim", args={}), tdir)
            self.done[fault] = (result, tdir, tag)
        return self.done[fault]


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(tmp_path_factory.mktemp("faults"))


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_recorded_and_leaves_no_process(fault: str, trial: Runs) -> None:
    result, tdir, tag = trial(fault)
    assert result.outcome.value != "ok" and result.reason, result
    assert result.capacity is None and result.objective is None, "a failed trial is never a fake number"
    assert result.log_path and Path(result.log_path).read_text().startswith("# servetune: ")
    assert wait_gone(logged_pids(tdir)) == [], "an engine PID from the log is still alive"
    assert pids_running(tag) == [], "a process of this trial's engine (or its reaper) is still alive"
    if result.records_path:  # load ran: every request is a record, failures carry their reason
        rows = pq.read_table(result.records_path).to_pylist()
        assert rows and all(r["error"] is None or r["error"].strip() for r in rows)
        if fault != "crash-mid-load":
            assert any(r["error"] for r in rows), "the fault failed no request?"
    row = result.to_row()  # what trials.parquet stores
    assert row["outcome"] == result.outcome.value and row["reason"] == result.reason


def _reason_params() -> list[Any]:
    return [pytest.param(f, id=f, marks=[pytest.mark.xfail(strict=True, reason=bug)] if bug else [])
            for f, (_, _, _, bug) in FAULTS.items()]


@pytest.mark.parametrize("fault", _reason_params())
def test_fault_outcome_and_reason(fault: str, trial: Runs) -> None:
    _, outcome, pattern, _ = FAULTS[fault]
    result, _, _ = trial(fault)
    assert result.outcome.value == outcome, result.reason
    assert re.search(pattern, result.reason), result.reason


def test_fault_trials_are_consistent_in_mlflow(trial: Runs, empty_store: Path, tmp_path: Path) -> None:
    """Each fault's trial as the driver logs it: one child run, its outcome and reason as tags, its engine log."""
    import shutil

    from mlflow.tracking import MlflowClient

    from tuner.tracking.mlflow_log import StudyTracker, default_uri

    shutil.copy(empty_store, tmp_path / "mlflow.db")
    tracker = StudyTracker(default_uri(tmp_path), "faults", "faults", tmp_path / "mlartifacts")
    tracker.start()
    results = {f: trial(f)[0] for f in FAULTS}
    ids = {f: tracker.log_trial(r, [], {}) for f, r in results.items()}
    tracker.finish(True)
    client = MlflowClient(tracking_uri=default_uri(tmp_path))
    assert sorted(tracker.logged_trials().values()) == sorted(ids.values())
    for f, r in results.items():
        run = client.get_run(ids[f])
        assert run.data.tags["servetune.outcome"] == r.outcome.value and run.data.tags["servetune.reason"] == r.reason
        assert run.info.status == ("FINISHED" if r.outcome.ran else "FAILED"), f
        assert "objective" not in run.data.metrics and "sla_capacity" not in run.data.metrics, f
        assert "engine.log" in {a.path for a in client.list_artifacts(ids[f])}, f


def test_port_taken_is_start_failed(tmp_path: Path) -> None:
    """Another process listens on the engine's port: start_failed 'port in use', nothing left running."""
    study = fault_study({})
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    launch = LaunchSpec(model=study.model, host="127.0.0.1", port=port, log_path=tmp_path / "engine.log",
                        settings=study.sim)
    try:
        with pytest.raises(EngineStartError) as err:
            with get_engine("sim").server({}, launch):
                pass
    finally:
        busy.close()
    assert err.value.outcome == "start_failed" and "port in use" in err.value.reason, err.value.reason
    assert pids_running(study.model.client_name) == []
