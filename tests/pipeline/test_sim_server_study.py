"""The same pipeline with the simulator as a real HTTP server (subprocess per trial, streaming client)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, small_study
from tuner.load.records import Request
from tuner.sim import SimulatedEngine

pytestmark = pytest.mark.slow


def test_study_over_http_with_the_sim_server(tmp_path: Path) -> None:
    path = small_study(
        tmp_path, name="http",
        sim={"flavour": "vllm", "gpu": "H200", "mode": "server", "time_scale": 5.0},
        # short points at higher rates: the HTTP path is what is tested (40 requests from 1 req/s took ~100 s)
        capacity={"mode": "rate", "low": 4, "high": 16, "tolerance": 0.25, "max_points": 3,
                  "requests_per_point": 16, "request_timeout_s": 60},
        sla=["p99_ttft_ms <= 3000", "p99_e2el_ms <= 60000"],
    )
    out = tmp_path / "out"
    proc = run_cli("--study", str(path), "--output", str(out), "--trials", "2", "--no-promote")
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) == 2
    for r in rows:
        assert r["outcome"] in ("ok", "sla_violated"), r["reason"]
        assert r["start_s"] is not None and r["start_s"] > 0, "server start time is measured"
        assert Path(r["log_path"]).exists(), "the engine log is kept"
        # the load generator's own error bar travels with every trial (tuner.load.ruler)
        assert r["metric.client_error_ms"] is not None and r["metric.client_error_ms"] >= 0
        assert r["metric.client_suspect"] in (0.0, 1.0)
        records = pq.read_table(r["records_path"]).to_pylist()
        assert records and all(x["output_tokens"] > 0 for x in records if x["error"] is None)
    # the baseline's records are on the server's clock (time_scale 5): replayed through the virtual face with the
    # same send times and lengths, the median TPOT agrees (read on the wall clock it was ~5x too low)
    base = next(r for r in rows if r["baseline"])
    recs = [x for x in pq.read_table(base["records_path"]).to_pylist() if x["error"] is None and not x["warmup"]]
    if "load" in recs[0]:
        recs = [x for x in recs if x["load"] == max(y["load"] for y in recs)]
    replay = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384).run(
        [Request(x["id"], x["sent_s"] - recs[0]["sent_s"], x["input_len"], x["output_len"]) for x in recs])
    served = float(np.median([x["tpot_ms"] for x in recs if x["tpot_ms"] is not None]))
    virtual = float(np.median([q.tpot_s * 1e3 for q in replay if q.tpot_s is not None]))
    assert served == pytest.approx(virtual, rel=0.25), (served, virtual)
