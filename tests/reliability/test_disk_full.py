"""The output folder's file system fills up mid-study (a 16 MiB tmpfs, filled once the first trial is
recorded): the run ends with one clear message naming the file and the bytes it needed, exit 1, no
traceback; the trials finished before stay in trials.parquet and match MLflow; no process outlives it.
Needs root (mount); skipped otherwise."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from mlflow.tracking import MlflowClient
from relhelp import RAY_ENV, fault_study_data, logged_pids, pids_running, wait_gone

from tests.conftest import ROOT
from tuner.common.atomic import read_table

pytestmark = pytest.mark.slow


@pytest.fixture
def small_fs(tmp_path: Path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(mnt: Path) -> None:
    """Write zeros until the file system refuses."""
    with (mnt / "filler").open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass


def test_disk_full_ends_with_one_message(tmp_path: Path, small_fs: Path) -> None:
    data = fault_study_data({}, name="diskfull", budget={"trials": 4, "max_concurrent": 1},
                            promotion={"enabled": False})
    tag = data["model"]["served_name"]
    study = tmp_path / "diskfull.yaml"
    study.write_text(yaml.safe_dump(data))
    out = small_fs / "out"
    store = tmp_path / "mlflow.db"  # MLflow elsewhere: its record is checked against trials.parquet
    argv = [sys.executable, "-m", "tuner.run", "--study", str(study), "--output", str(out),
            "--mlflow-uri", f"sqlite:///{store}"]
    log = tmp_path / "driver.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV},
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 500
        while time.monotonic() < deadline and proc.poll() is None:
            p = out / "trials.parquet"
            if p.exists() and read_table(p).num_rows:
                break
            time.sleep(0.2)
        assert proc.poll() is None, log.read_text()[-3000:]
        fill(small_fs)
        rc = proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    text = log.read_text()
    assert rc == 1, text[-3000:]
    assert "Traceback" not in text, text[-4000:]
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "disk full: no space left to write" in errors[0] and "bytes needed" in errors[0], text[-3000:]
    assert "--resume" in errors[0]
    kept = pq.read_table(out / "trials.parquet").to_pylist()
    assert kept, "the trials finished before the disk filled are kept"
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name("diskfull")
    parent = client.search_runs([exp.experiment_id], "tags.`servetune.kind` = 'study'")[0]
    assert parent.info.status == "FAILED"
    runs = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    # MLflow's artifacts live on the full disk too: a trial may be in trials.parquet without a complete run
    # (its row has no run id; --resume logs it), never a complete run for a trial trials.parquet lacks.
    complete = {r.data.tags["servetune.trial_id"]: r.info.run_id for r in runs if r.info.status != "RUNNING"}
    assert set(complete) <= {r["trial_id"] for r in kept}
    assert all(complete.get(r["trial_id"]) == r["mlflow_run_id"] for r in kept if r["mlflow_run_id"])
    assert wait_gone(logged_pids(out), timeout_s=30) == [] and pids_running(tag) == []


def test_a_full_disk_under_optuna_ends_the_tune_search_without_escaping_into_tune(small_fs: Path) -> None:
    """Optuna's SQLite store fills up between ask and tell (seen in CI: trials.parquet still fit, optuna.db
    did not): the Ray Tune searcher keeps the fault for the driver and asks for nothing more, instead of
    raising into Tune, which logged a traceback before the driver's one-line error."""
    from tests.search.helpers import make_study
    from tuner.common.errors import disk_full_in
    from tuner.search.signals import Interrupt
    from tuner.search.space import build_space
    from tuner.search.tune_searcher import make_searcher

    study = make_study()
    space = build_space(study)
    searcher = make_searcher(study, space, storage=f"sqlite:///{small_fs / 'optuna.db'}")
    Interrupt.reset()
    tune_log = logging.getLogger("ray.tune")
    level = tune_log.level
    try:
        assert isinstance(searcher.suggest("t0"), dict)
        fill(small_fs)
        searcher.on_trial_complete("t0", None, error=True)  # Optuna's write of the trial fails; must not raise
        assert Interrupt.failure is not None and disk_full_in(Interrupt.failure, small_fs) is not None
        assert "SQLite store" in str(disk_full_in(Interrupt.failure, small_fs))
        assert searcher.suggest("t1") == "FINISHED"
    finally:
        Interrupt.reset()
        tune_log.setLevel(level)
