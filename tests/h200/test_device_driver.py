"""The H200 device driver, rehearsed on the simulated engine in virtual time (seconds, no GPU).

What the device relies on: baseline first, pre-screened configs next (in order, once), the searcher's
state carried from one 10-minute command to the next through --state, every trial packed into --out
after it finishes, and the files ingest.py turns into the pipeline's outputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tuner.trial.table import read_trials

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "scripts" / "h200" / "device_study.py"
STUDY = REPO / "studies" / "h200-sim-rehearsal.yaml"
QUEUE = [{"max_num_seqs": 256, "max_num_batched_tokens": 2048}, {"max_num_seqs": 128, "max_num_batched_tokens": 16384}]


def drive(state: Path, out: Path, trials: int, deadline_s: float = 120, gpus: int = 1, executor: str = "process"
          ) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(DRIVER), str(STUDY), "--out", str(out), "--state", str(state),
           "--deadline", str(time.time() + deadline_s), "--trials", str(trials), "--trial-estimate-s", "1",
           "--enqueue", json.dumps(QUEUE), "--gpus", str(gpus), "--executor", executor]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def two_commands(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("h200")
    state, out1, out2 = root / "state", root / "out1", root / "out2"
    for out, n in ((out1, 2), (out2, 2)):
        proc = drive(state, out, n)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return state, out1, out2


def test_baseline_then_queue_then_sampler_across_commands(two_commands: tuple[Path, Path, Path]) -> None:
    _, out1, out2 = two_commands
    first = read_trials(out1 / "trials.parquet")
    both = read_trials(out2 / "trials.parquet")
    assert [t.number for t in first] == [0, 1]
    assert [t.number for t in both] == [0, 1, 2, 3]
    assert both[0].baseline and both[0].args == {} and not any(t.baseline for t in both[1:])
    assert [both[1].params, both[2].params] == QUEUE
    assert both[3].params not in QUEUE and both[3].params  # the sampler's own pick, not a repeat


def test_out_holds_packed_trials_and_gpu_check(two_commands: tuple[Path, Path, Path]) -> None:
    _, _, out2 = two_commands
    assert sorted(p.name for p in out2.iterdir()) == ["summary.json", "trials.parquet", "trials.tar.gz"]
    with tarfile.open(out2 / "trials.tar.gz") as tar:
        names = tar.getnames()
    assert {"results.jsonl", "driver.log"} <= set(names)
    assert sum(n.endswith("gpu_samples.json") for n in names) == 4
    summary = json.loads((out2 / "summary.json").read_text())
    assert [t["number"] for t in summary["trials"]] == [0, 1, 2, 3]
    for t in read_trials(out2 / "trials.parquet"):
        assert any(n.startswith("gpu free after stop: True") for n in t.notes), t.notes


def test_no_trial_starts_past_the_deadline(tmp_path: Path) -> None:
    proc = drive(tmp_path / "state", tmp_path / "out", trials=3, deadline_s=-1)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stop:" in proc.stdout
    assert not (tmp_path / "out" / "trials.parquet").exists()


@pytest.mark.parametrize("executor", ["process", "ray"])
def test_two_gpus_run_two_trials_at_once(tmp_path: Path, executor: str) -> None:
    """Both executors: a trial per GPU at a time, each GPU used, the baseline and the queue first.
    Under Ray the GPU comes from Ray's assignment (a local Ray instance told it has 2 GPUs)."""
    proc = drive(tmp_path / "state", tmp_path / "out", trials=4, gpus=2, executor=executor)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    trials = read_trials(tmp_path / "out" / "trials.parquet")
    assert [t.number for t in trials] == [0, 1, 2, 3]
    assert trials[0].baseline and [trials[1].params, trials[2].params] == QUEUE
    gpus = [next(n for n in t.notes if n.startswith("gpu ")).split(";")[0] for t in trials]
    assert sorted(gpus[:2]) == ["gpu 0", "gpu 1"] and set(gpus) == {"gpu 0", "gpu 1"}
    spans = [tuple(int(x) for x in n.split("ran ")[1].split(" ")[0].split("-")) for t in trials for n in t.notes
             if "; ran " in n]
    assert spans[0][0] <= spans[1][1] and spans[1][0] <= spans[0][1], f"trials 0 and 1 did not overlap: {spans}"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["gpus"] == [0, 1] and summary["executor"] == executor
    assert summary["this_command_trials_elapsed_s"] > 0


def test_ingest_writes_pipeline_outputs(two_commands: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, out2 = two_commands
    dest = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "h200" / "ingest.py"), str(STUDY), str(out2), "--dest", str(dest),
         "--mlflow-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in ("trials.parquet", "pareto.json", "report.html.gz", "requests_baseline.parquet", "trial_files.tar.gz"):
        assert (dest / name).exists(), name
    assert len(read_trials(dest / "trials.parquet")) == 4
    pareto = json.loads((dest / "pareto.json").read_text())
    assert pareto["front"], pareto
