"""benchmarks/h200_report.py on hand-made result folders: runs pooled only when they are the same study
(load grid apart), a cut-off run claims no ratio, and the last line says what the files hold."""

from __future__ import annotations

import gzip
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


def _pts(*points: tuple[float, bool]) -> list[tuple[float, bool]]:
    return list(points)


def _erow(number: int, engine: str, points: list[tuple[float, bool]], *, baseline: bool, args: dict | None = None) -> dict:
    r = _row(number, points, baseline=baseline)
    r["engine"] = engine
    r["args_json"] = json.dumps({} if baseline else (args or {"quantization": "fp8"}))
    r["points_json"] = json.dumps([{"load": load, "feasible": ok, "p50_ttft_ms": 100.0 + load, "p99_ttft_ms": 400.0 + load,
                                    "p50_tpot_ms": 10.0, "p99_tpot_ms": 30.0 if ok else 60.0, "p50_itl_ms": 8.0,
                                    "p99_itl_ms": 96.0, "jitter_tpot": 0.25, "output_throughput": 200.0 * load}
                                   for load, ok in points])
    return r


def test_several_runs_of_one_test_take_the_narrowest_bracket_not_the_highest_ratio(tmp_path: Path) -> None:
    # run a: defaults [7.5, 9), FP8 [12, 16): 1.600, bracket 1.33-2.13
    _run(tmp_path, "h200-a", [_erow(0, "vllm", _pts((6, True), (12, False), (9, False), (7.5, True)), baseline=True),
                              _erow(1, "vllm", _pts((6, True), (12, True), (16, False)), baseline=False)], workload={"profile": "dynamic"})
    # run b, a coarser grid: defaults [9, 12), FP8 met the cap 16 (not bounded above): 16 / 9 = 1.778
    _run(tmp_path, "h200-b", [_erow(0, "vllm", _pts((6, True), (12, False), (9, True)), baseline=True),
                              _erow(1, "vllm", _pts((6, True), (12, True), (16, True)), baseline=False)],
         workload={"profile": "dynamic"}, capacity={"mode": "rate", "low": 6, "high": 16, "duration_s": 20})
    out = _report(tmp_path)
    assert "dynamic: 2 runs each give a tuned/default SLA capacity ratio" in out
    assert "h200-a: 12 / 7.5 = 1.600, bracket 1.33-2.13" in out
    assert "h200-b: 16 / 9 = 1.778, bracket 1.33-na" in out
    assert "the last line takes h200-a (1.600)" in out
    # the two runs' defaults brackets [7.5, 9) and [9, 12) do not overlap: said, with what differs and the point
    assert "vllm defaults: 7.5 [7.5, 9) in h200-a, 9 [9, 12) in h200-b: the brackets do not overlap" in out
    assert "capacity.duration_s 30 vs 20" in out
    assert "at 9 req/s: missed in h200-a (P99 TTFT 409 ms, P99 TPOT 60.0 ms), met in h200-b" in out
    assert "tuned_vs_default_dynamic=1.600 " in out.strip().splitlines()[-1]


def _failover(folder: Path, exit_code: int, after: list[str]) -> None:
    for side, engine, trial in (("primary", "vllm", "t2"), ("secondary", "sglang", "t3")):
        (folder / f"failover-{side}").mkdir()
        (folder / f"failover-{side}" / "promoted.yaml").write_text(yaml.safe_dump({"applications": [{"args": {
            "engine": engine, "lineage": {"trial_id": trial, "model_version": "2"}}}]}))
    res = {"ok": exit_code == 0, "deploy_s": 197.3, "killed_pids": [11], "before": ["primary"] * 3, "after": after,
           "gpu_sharing": {"primary": {"memory_knob": "gpu_memory_utilization", "deployed": 0.42, "ray_num_gpus": 0.5}}}
    (folder / "failover.json").write_text(json.dumps({"exit_code": exit_code, "before": ["primary"] * 3, "after": after,
                                                      "result": res}))
    (folder / "failover-gpu.csv").write_text("timestamp, pid, process_name, used_gpu_memory [MiB]\n"
                                             "t, 1, VLLM::EngineCore, 9692 MiB\nt, 1, VLLM::EngineCore, 62560 MiB\n"
                                             "t, 2, sglang::scheduler, 37200 MiB\n")


def _gzlog(folder: Path, name: str, text: str) -> None:
    (folder / "trials").mkdir(exist_ok=True)
    (folder / "trials" / f"{name}.engine.log.gz").write_bytes(gzip.compress(text.encode()))


def test_joint_study_compares_engines_and_its_failover_serves_both(tmp_path: Path) -> None:
    rows = [_erow(0, "vllm", _pts((6, True), (12, False)), baseline=True),
            _erow(1, "sglang", _pts((6, True), (12, False), (9, True)), baseline=True),
            _erow(2, "vllm", _pts((6, True), (12, True), (16, False)), baseline=False),
            _erow(3, "sglang", _pts((6, True), (12, False)), baseline=False, args={"kv_cache_dtype": "fp8_e4m3"})]
    _run(tmp_path, "h200-joint", rows, engine=["vllm", "sglang"], workload={"profile": "dynamic"})
    folder = tmp_path / "h200" / "h200-joint"
    _gzlog(folder, "000-t0", "GPU KV cache size: 814,368 tokens\nGPU KV cache usage: 10.0%\nGPU KV cache usage: 68.5%\n")
    _gzlog(folder, "001-t1", "max_total_num_tokens=803516, chunked\ntoken usage: 0.76, #run\ntoken usage: 0.02, #run\n")
    _failover(folder, 0, ["secondary"] * 3)
    out = _report(tmp_path)
    # the ratio is against the engines' best defaults (SGLang's 9), not the first baseline (vLLM's 6)
    assert "tuned/default SLA capacity = 12 / 9 = 1.333" in out
    assert "| vllm | defaults | t0 | defaults (baseline) | 6 [6, 12) | 1,200 | 106 | 406 | 10.0 | 30.0 | 8.0 | 96.0 | 0.250 | " \
           "12.0 | 814,368 | 68.5 |" in out
    assert "| sglang | defaults | t1 | defaults (baseline) | 9 [9, 12) |" in out and "| 803,516 | 76.0 |" in out
    assert "| sglang | best |" not in out  # SGLang's FP8 (6) is below its defaults (9): its best is the defaults
    assert "sglang: best / defaults SLA capacity = 9 / 9 = 1.000 (from the brackets 0.75-1.33); the defaults were its best" in out
    assert "best vllm / best sglang SLA capacity = 12 / 9 = 1.333 (from the brackets 1.00-1.78)" in out
    assert "defaults sglang / defaults vllm SLA capacity = 9 / 6 = 1.500" in out
    assert "joint winner: vllm t2 (quantization=fp8), SLA capacity 12 [12, 16) req/s" in out
    assert "at 12 req/s (a load every trial measured)" in out
    assert "peak GPU memory per process (failover-gpu.csv, every 10 s): VLLM::EngineCore 62,560 MiB, " \
           "sglang::scheduler 37,200 MiB" in out
    assert "served on the GPU: vllm, sglang" in out
    last = out.strip().splitlines()[-1]
    assert "tuned_vs_default_dynamic=1.333 " in last and "engines=sglang,vllm served_on_gpu=yes" in last


def test_a_failover_that_did_not_move_traffic_is_not_served(tmp_path: Path) -> None:
    _run(tmp_path, "h200-joint", [_erow(0, "vllm", _pts((6, True), (12, False)), baseline=True),
                                  _erow(1, "sglang", _pts((6, True), (12, False)), baseline=True)],
         engine=["vllm", "sglang"], workload={"profile": "dynamic"})
    _failover(tmp_path / "h200" / "h200-joint", 1, [])
    out = _report(tmp_path)
    assert "answered after: none" in out and "served on the GPU:" not in out
    assert "served_on_gpu=no" in out.strip().splitlines()[-1]
