"""Adding an engine is one module and one space file: a made-up third engine runs a whole study.

tests/engines/toy_engine.py owns everything about "toy" (argument mapping, memory knobs, /metrics
names, failure patterns, space file); it is registered through SERVETUNE_ENGINES only. The study runs
through `python -m tuner.run` (Ray Tune, the searcher, the trial runner, MLflow, the report) untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, small_study

pytestmark = pytest.mark.slow
TOY = {"SERVETUNE_ENGINES": "toy=tests.engines.toy_engine:ToyEngine"}


def test_a_third_engine_from_one_module_and_one_space_file_runs_a_study(tmp_path: Path) -> None:
    path = small_study(
        tmp_path, name="toy", engine="toy",
        # short points at high rates: the study's path is what is tested, not the toy's capacity (40 requests
        # from 1 req/s made this the slowest test of the suite, ~200 s)
        capacity={"mode": "rate", "low": 4, "high": 16, "tolerance": 0.25, "max_points": 3,
                  "requests_per_point": 16, "request_timeout_s": 60},
        sla=["p99_ttft_ms <= 3000", "p99_e2el_ms <= 60000"],
    )
    out = tmp_path / "out"
    proc = run_cli("--study", str(path), "--output", str(out), "--trials", "3", "--no-promote", env=TOY)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) == 3 and {r["engine"] for r in rows} == {"toy"}
    assert any(r["baseline"] for r in rows)
    searched = [r for r in rows if not r["baseline"]]
    for r in rows:
        assert r["outcome"] in ("ok", "sla_violated"), r["reason"]
        assert r["start_s"] is not None and r["start_s"] > 0, "a server was started and became ready"
        assert json.loads(r["resolved_json"])["engine"] == "sim"  # read back from the toy's own server
    for r in searched:  # toy's own knob names were searched and mapped to the server's flags
        params = json.loads(r["params_json"])
        assert set(params) <= {"toy_batch", "toy_memory", "toy_chunk"} and params
        resolved = json.loads(r["resolved_json"])
        if "toy_batch" in params:
            assert resolved.get("max_num_seqs") == params["toy_batch"], resolved


def test_without_registration_the_engine_is_bad_input(tmp_path: Path) -> None:
    path = small_study(tmp_path, name="toy", engine="toy")
    proc = run_cli("--study", str(path), "--output", str(tmp_path / "out"), "--dry-run")
    assert proc.returncode == 2 and "unknown engine 'toy'" in proc.stderr, proc.stderr
