"""scripts/h200/keep_results.py on a hand-made unpacked study folder of two engines: per-request Parquet kept
for each engine's baseline and best only, the failover demo's files kept, report.html left out on request."""

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


def _trial(n: int, tid: str, engine: str, cap: float | None, *, baseline: bool) -> dict:
    return {"trial_id": tid, "number": n, "engine": engine, "baseline": baseline, "feasible": cap is not None,
            "capacity": cap, "objective": None if cap is None else 100.0 * cap}


def test_unpacked_joint_study_folder(tmp_path: Path) -> None:
    study = tmp_path / "files" / "joint"
    rows = [_trial(0, "aaaa0000", "vllm", 9, baseline=True), _trial(1, "bbbb1111", "sglang", 6, baseline=True),
            _trial(2, "cccc2222", "vllm", 12, baseline=False), _trial(3, "dddd3333", "vllm", 10, baseline=False),
            _trial(4, "eeee4444", "sglang", None, baseline=False)]
    for r in rows:
        d = study / "trials" / f"{r['number']:03d}-{r['trial_id']}"
        d.mkdir(parents=True)
        (d / "engine.log").write_text(f"log of {r['trial_id']}\n")
        pq.write_table(pa.Table.from_pylist([{"id": r["trial_id"]}]), d / "requests.parquet")
    pq.write_table(pa.Table.from_pylist(rows), study / "trials.parquet")
    (study / "report.html").write_text("x" * 1000)
    (study / "plots").mkdir()
    (study / "plots" / "pareto.html").write_text("<html>pareto</html>")
    (study / "failover.json").write_text(json.dumps({"exit_code": 0}))
    (study / "failover.log").write_text("ok: traffic moved to the secondary\n")
    (study / "failover-gpu.csv").write_text("timestamp, pid, process_name, used_gpu_memory [MiB]\n")
    for side in ("failover-primary", "failover-secondary"):
        (study / side).mkdir()
        (study / side / "promoted.yaml").write_text(f"side: {side}\n")
    (study / "replica_logs").mkdir()
    (study / "replica_logs" / "servetune-sglang-replica-x.log").write_text("sglang replica\n")
    studies = tmp_path / "studies"
    studies.mkdir()
    (studies / "space-v.yaml").write_text("engine: vllm\n")
    (studies / "space-s.yaml").write_text("engine: sglang\n")
    (studies / "joint.yaml").write_text(yaml.safe_dump({"name": "joint", "search_space": {
        "vllm": {"file": "space-v.yaml"}, "sglang": {"file": "space-s.yaml", "fixed": {"attention_backend": "triton"}}}}))
    dest = tmp_path / "kept"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "h200" / "keep_results.py"), str(tmp_path / "files"),
                           "joint", str(studies / "joint.yaml"), "--dest", str(dest), "--no-report-html"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    kept = {str(f.relative_to(dest)) for f in dest.rglob("*") if f.is_file()}
    assert {f for f in kept if f.startswith("requests_")} == {
        "requests_vllm_baseline.parquet", "requests_vllm_best.parquet", "requests_sglang_baseline.parquet"}
    assert pq.read_table(dest / "requests_vllm_best.parquet").to_pylist() == [{"id": "cccc2222"}]
    assert {"failover.json", "failover-gpu.csv", "failover.log.gz", "failover-primary/promoted.yaml",
            "failover-secondary/promoted.yaml", "replica_logs/servetune-sglang-replica-x.log.gz",
            "plots/pareto.html.gz", "space-v.yaml", "space-s.yaml", "study.yaml",
            "trials/004-eeee4444.engine.log.gz"} <= kept
    assert "report.html.gz" not in kept
    assert gzip.decompress((dest / "failover.log.gz").read_bytes()).startswith(b"ok: traffic moved")
