"""A study whose driver is killed (SIGKILL, mid-study) continues with --resume: nothing finished is lost or run again.

The driver connects to a real Ray head that outlives it, as on a cluster; the second driver resumes
from the same output folder (trials.parquet, Tune's experiment state, the MLflow store).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from tests.cluster.ray_head import RayHead, descendants
from tests.conftest import ROOT, small_study

pytestmark = [pytest.mark.slow]
TRIALS = 5


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    path = out / "trials.parquet"
    if not path.exists():
        return {}
    try:
        return {r["trial_id"]: r for r in pq.read_table(path).to_pylist()}
    except OSError:  # written atomically, but be tolerant of a reader racing the rename
        return {}


def _started_ids(log: str) -> list[str]:
    return re.findall(r"^\[servetune\] trial (\S+) started", log, flags=re.M)


def test_killed_driver_resumes_without_losing_or_repeating_trials(head: RayHead, tmp_path: Path) -> None:
    study = small_study(tmp_path, name="resume", budget={"trials": TRIALS, "max_concurrent": 1},
                        sla=["p99_ttft_ms <= 2000", "p99_e2el_ms <= 60000"])
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "tuner.run", "--study", str(study), "--output", str(out), "--no-promote"]
    env = head.driver_env(str(ROOT))
    first_log = tmp_path / "first.log"
    with first_log.open("w") as log:
        driver = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    deadline = time.monotonic() + 600
    while not _rows(out) and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if driver.poll() is not None:
        pytest.fail(f"the driver ended (rc={driver.returncode}) before it could be killed mid-study:\n"
                    + first_log.read_text()[-4000:])
    kids = descendants(driver.pid)
    os.kill(driver.pid, signal.SIGKILL)  # no cleanup, no atexit: like a lost head or an OOM-killed driver
    driver.wait(timeout=30)
    for pid in kids:  # only what this driver started, by pid
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    before = _rows(out)
    assert 1 <= len(before) < TRIALS, f"killed with {len(before)} of {TRIALS} trials finished"

    resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=900, check=False)
    log = resumed.stdout + resumed.stderr
    assert resumed.returncode in (0, 3), log[-6000:]

    after = _rows(out)
    summary = {tid: (r["number"], r["params_json"]) for tid, r in after.items()}
    assert len(after) == TRIALS, f"before: {sorted(before)}\nafter: {summary}\n{log[-4000:]}"
    assert sorted(r["number"] for r in after.values()) == list(range(TRIALS)), "a trial number was repeated"
    for tid, row in before.items():  # finished trials are kept exactly as they were, not re-run
        kept = after[tid]
        for key in ("number", "params_json", "outcome", "objective", "metrics_json", "wall_s"):
            assert kept[key] == row[key], (tid, key)
    assert not set(_started_ids(log)) & set(before), "a finished trial was started again"
    assert sum(1 for r in after.values() if r["baseline"]) == 1

    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    exp = client.get_experiment_by_name("resume")
    parents = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")
    assert len(parents) == 1, "the resumed driver reuses the study's parent run"
    trial_runs = [r for r in client.search_runs([exp.experiment_id],
                                                f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
                  if r.data.tags.get("servetune.kind") == "trial"]
    ids = [r.data.tags["servetune.trial_id"] for r in trial_runs]
    assert sorted(ids) == sorted(after), "one MLflow run per trial: none lost, none duplicated"
