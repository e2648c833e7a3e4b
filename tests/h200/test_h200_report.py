"""benchmarks/h200_report.py on hand-made result folders: runs pooled only when they are the same study
(load grid apart), a cut-off run claims no ratio, and the last line says what the files hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[2]
STUDY = {"name": "mix", "engine": "vllm", "workload": {"profile": "mixed"}, "sla": ["p99_ttft_ms <= 2000"],
         "capacity": {"mode": "rate", "low": 4, "high": 16, "duration_s": 30}, "tracking": {"experiment": "mix"}}


def _row(number: int, points: list[tuple[float, bool]], *, baseline: bool) -> dict:
    met = [load for load, ok in points if ok]
    return {"trial_id": f"t{number}", "number": number, "engine": "vllm", "baseline": baseline,
            "outcome": "ok" if met else "sla_violated", "feasible": bool(met), "capacity": max(met) if met else None,
            "objective": 100.0 * max(met) if met else None,
            "args_json": json.dumps({} if baseline else {"quantization": "fp8"}),
            "points_json": json.dumps([{"load": load, "feasible": ok} for load, ok in points])}


def _run(root: Path, name: str, rows: list[dict], *, finished: bool = True, **study) -> None:
    folder = root / "h200" / name
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(yaml.safe_dump({**STUDY, "name": name, **study}))
    pq.write_table(pa.Table.from_pylist(rows), folder / "trials.parquet")
    end = f"study {name}: {len(rows)} trials in 400 s (ok {len(rows)})\n" if finished else ""
    (folder / "driver.log").write_text(f"[servetune] trial t0 started (vllm)\n{end}")


def _report(root: Path) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "h200_report.py"), "--results", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_two_runs_of_one_study_are_pooled_and_a_cut_off_run_claims_nothing(tmp_path: Path) -> None:
    # run 1: the defaults miss the lowest load (no capacity), FP8 is bounded [5, 6)
    _run(tmp_path, "h200-mix", [_row(0, [(4, False)], baseline=True),
                                _row(1, [(4, True), (8, False), (6, False), (5, True)], baseline=False)])
    # run 2, a lower grid, cut off after the defaults: [3, 3.75)
    _run(tmp_path, "h200-mix-low", [_row(0, [(3, True), (6, False), (4.5, False), (3.75, False)], baseline=True)],
         finished=False, capacity={"mode": "rate", "low": 3, "high": 16, "duration_s": 30})
    out = _report(tmp_path)
    assert "study cut off before its end" in out
    assert "defaults were not beaten" not in out  # the cut-off run's lone baseline is no verdict
    assert "= 1.667, bracket 1.33-2.00; h200-mix baseline points 4x" in out
    assert out.strip().splitlines()[-1].startswith("tuned_vs_default_static=na tuned_vs_default_dynamic=na "
                                                   "tuned_vs_default_mixed=1.667")


def test_runs_that_differ_beyond_the_load_grid_are_not_pooled(tmp_path: Path) -> None:
    _run(tmp_path, "h200-mix", [_row(1, [(4, True), (8, False)], baseline=False)])
    _run(tmp_path, "h200-mix-other-sla", [_row(0, [(3, True), (6, False)], baseline=True)],
         finished=False, sla=["p99_ttft_ms <= 1000"])
    out = _report(tmp_path)
    assert "pooled" not in out
    assert "tuned_vs_default_mixed=na" in out.strip().splitlines()[-1]
