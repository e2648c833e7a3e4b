"""The simulator gate in a real-engine study: `python -m tuner.run` on a "vLLM" that is the simulated
engine's HTTP server with perturbed cost terms (tests/search/perturbed_sim.py; time scale 5, so the
calibrated simulator under-predicts it by a large, unknown factor). The gate must skip candidates it can
rule out (here: configs the simulator says cannot start), say why, end the search when nothing is left,
and record predicted vs measured per launched trial. The upper-bound path is checked without Ray in
test_sim_gate.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import run_cli

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent


def gate_study(tmp: Path, **search: object) -> Path:
    data = {
        "name": "gate-http", "seed": 0, "engine": "vllm",
        "engines": {"vllm": {"command": [sys.executable, str(HERE / "perturbed_sim.py"), "--time-scale", "5"],
                             "check_args": False}},
        "model": {"name": "Qwen/Qwen3-8B", "served_name": "qwen3-8b", "max_model_len": 16384, "dtype": "bfloat16"},
        "workload": {"profile": "dynamic", "arrivals": {"process": "poisson"}, "warmup_requests": 4},
        "capacity": {"mode": "rate", "low": 2, "high": 16, "tolerance": 0.25, "max_points": 3,
                     "requests_per_point": 12, "request_timeout_s": 60},
        "sla": ["p99_ttft_ms <= 1000", "p99_itl_ms <= 100", "p99_e2el_ms <= 20000"],
        # memory knobs near the top: the simulator predicts most sampled configs run out of memory at start
        "search_space": {"overrides": {"gpu_memory_utilization": {"low": 0.96, "high": 0.97},
                                       "max_cudagraph_capture_size": {"low": 1900, "high": 2048}}},
        "objective": {"metric": "output_throughput"},
        "search": {"algorithm": "tpe", "n_startup_trials": 3, **search},
        "budget": {"trials": 4, "max_concurrent": 1},
        "resources": {"cpus_per_trial": 1},
        "promotion": {"enabled": False},
    }
    path = tmp / "gate.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_gate_skips_what_the_simulator_rules_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # pool 0: the sampler's candidates are judged one by one (a pool of the simulator's best configs, tested in
    # test_sim_gate_loop.py, could fill the budget before the sampler gets a turn)
    proc = run_cli("--study", str(gate_study(tmp_path, sim_gate={"max_skips": 1, "pool": 0})), "--output", str(out),
                   "--no-promote")
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    log = [json.loads(line) for line in (out / "sim_gate.jsonl").read_text().splitlines()]
    launched = [r for r in log if r["event"] == "launched"]
    skipped = [r for r in log if r["event"] == "skipped"]
    measured = [r for r in log if r["event"] == "measured"]
    # the gate really skips: fewer real trials than the budget, each skip with its reason
    assert skipped, "no candidate was skipped"
    assert len(rows) == len(launched) < 4  # the search ended on the skip, GPU time unspent
    assert all(r["reason"].startswith(("upper bound", "simulator")) for r in skipped), skipped
    assert all(r["upper"] is None or r["incumbent"] is not None and r["upper"] <= r["incumbent"] for r in skipped)
    # every launched trial carries its prediction (trials.parquet notes) and its measurement in the log
    for r in rows:
        notes = json.loads(r["notes_json"])
        assert any(n.startswith("sim_gate: predicted") for n in notes), notes
    assert sorted(m["number"] for m in measured) == sorted(r["number"] for r in rows)
    # the baseline's per-request records were read for the host fit (tuner.sim.host): factors, or why not
    host = [r for r in log if r["event"] == "host"]
    assert host and host[0]["number"] == 0 and ("launch" in host[0] or host[0]["skipped"]), host
    base = next(m for m in measured if m["number"] == 0)
    assert base["predicted_capacity"] and base["measured_capacity"]
    # the correction learns the perturbed engine: after the real trials it is not the neutral 1.0
    assert measured[-1]["correction"] != 1.0
    pareto = json.loads((out / "pareto.json").read_text())
    assert any("sim_gate" in r["reason"] for r in pareto.get("rejected", [])), pareto.get("rejected")
