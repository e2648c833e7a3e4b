"""What the GPU host relies on, through `python -m tuner.run --executor ray|local` on two fake GPUs.

Trials run side by side, one per GPU: the first two overlap, both GPUs are used, and no GPU holds two
trials at once. Under Ray the GPUs are a local Ray told it has two (RAY_OVERRIDE_RESOURCES) and Ray
assigns them; under the local executor they are the driver's CUDA_VISIBLE_DEVICES=0,1 and the executor
assigns them. The simulated engine runs in virtual time, so no GPU is touched; each trial still holds
its GPU (resources.gpus_per_trial: 1) for its whole run. The local executor also runs where Ray cannot
be imported at all.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import run_cli, small_study
from tuner.trial.result import TrialResult
from tuner.trial.table import read_trials

pytestmark = pytest.mark.slow
FAKE_GPUS = {"ray": {"RAY_OVERRIDE_RESOURCES": json.dumps({"GPU": 2}), "RAY_raylet_start_wait_time_s": "180"},
             "local": {"CUDA_VISIBLE_DEVICES": "0,1"}}  # a generous raylet start wait on a busy machine
# A sitecustomize that makes `import ray` fail, and says so in a file, in the driver and every process it starts.
BLOCK_RAY = '''
import os, sys
class _NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            with open(os.environ["RAY_IMPORT_LOG"], "a") as f:
                f.write(f"{os.getpid()} {name}\\n")
            raise ImportError(f"ray is blocked in this test: {name}")
        return None
sys.meta_path.insert(0, _NoRay())
'''


def gpu_study(tmp: Path, trials: int = 4, server: bool = False) -> Path:
    """`server`: the simulator's HTTP face, so a trial lasts seconds of real time (a server start and a
    paced load) and trials started a few seconds apart really overlap; virtual time ends one in ~0.3 s. At time
    scale 5 (not 50): the client reads the server on its clock, where 50x the HTTP path's cost broke the default
    SLA's P99 ITL (100 ms) and left no feasible trial."""
    sim = {"flavour": "vllm", "gpu": "H200", "mode": "server", "time_scale": 5} if server else None
    return small_study(tmp, name="gpus", budget={"trials": trials, "max_concurrent": 2},
                       resources={"gpus_per_trial": 1}, promotion={"enabled": False},
                       capacity={"mode": "rate", "low": 2, "high": 8, "tolerance": 0.25, "max_points": 2,
                                 "requests_per_point": 24, "request_timeout_s": 60},
                       **({"sim": sim} if sim else {}))


def overlap(a: TrialResult, b: TrialResult) -> bool:
    assert a.started_at and a.ended_at and b.started_at and b.ended_at
    return a.started_at < b.ended_at and b.started_at < a.ended_at


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_two_gpus_run_two_trials_at_once(tmp_path: Path, executor: str) -> None:
    out = tmp_path / "out"
    proc = run_cli("--study", str(gpu_study(tmp_path, server=True)), "--output", str(out), "--executor", executor,
                   env=FAKE_GPUS[executor])
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr[-3000:]
    trials = read_trials(out / "trials.parquet")
    assert [t.number for t in trials] == [0, 1, 2, 3] and trials[0].baseline
    assert all(len(t.gpus) == 1 for t in trials), [t.gpus for t in trials]
    assert {t.gpus[0] for t in trials} == {0, 1}, "both GPUs were used"
    assert overlap(trials[0], trials[1]), "the first two trials ran side by side"
    for a, b in itertools.combinations(trials, 2):  # a GPU holds one trial at a time
        assert not (overlap(a, b) and a.gpus == b.gpus), (a.number, b.number, a.gpus)
    # the same outputs whichever executor ran the trials
    assert json.loads((out / "pareto.json").read_text())["front"]
    assert (out / "report.html").exists()
    with sqlite3.connect(out / "mlflow.db") as db:
        runs = db.execute("select r.run_uuid, t.value from runs r join tags t on t.run_uuid = r.run_uuid "
                          "where t.key = 'servetune.trial_id'").fetchall()
    assert sorted(tid for _, tid in runs) == sorted(t.trial_id for t in trials)
    assert all(t.mlflow_run_id for t in trials)


def test_local_executor_runs_where_ray_cannot_be_imported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_RAY)
    log = tmp_path / "ray_imports.log"
    env = {**FAKE_GPUS["local"], "RAY_IMPORT_LOG": str(log)}
    study = gpu_study(tmp_path, trials=3)
    # the blocker works: the ray executor cannot start
    ray_run = run_cli("--study", str(study), "--output", str(tmp_path / "ray"), "--executor", "ray",
                      env={**env, "PYTHONPATH": f"{site}:{Path(__file__).resolve().parents[2]}"})
    assert ray_run.returncode != 0 and log.exists(), ray_run.stderr[-2000:]
    log.unlink()
    out = tmp_path / "out"
    proc = run_cli("--study", str(study), "--output", str(out), "--executor", "local",
                   env={**env, "PYTHONPATH": f"{site}:{Path(__file__).resolve().parents[2]}"})
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr[-3000:]
    assert not log.exists(), f"something imported Ray: {log.read_text()[:2000]}"
    trials = read_trials(out / "trials.parquet")
    assert len(trials) == 3 and all(t.outcome.ran for t in trials), [(t.outcome, t.reason) for t in trials]
