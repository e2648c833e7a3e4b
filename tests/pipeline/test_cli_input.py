"""The CLI refuses bad input with exit 2 before anything starts, and --dry-run starts nothing."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli, small_study


def test_malformed_study_names_the_bad_key(tmp_path: Path) -> None:
    path = small_study(tmp_path)
    path.write_text(path.read_text().replace("max_model_len:", "max_model_lenn:"))
    proc = run_cli("--study", str(path), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert "model.max_model_lenn" in proc.stderr and "unknown key" in proc.stderr
    assert not (tmp_path / "out" / "trials.parquet").exists()


def test_dry_run_prints_plan_and_starts_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("--study", str(small_study(tmp_path)), "--output", str(out), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run" in proc.stdout and "SLA: p99_ttft_ms <= 1000" in proc.stdout
    assert "sim.max_num_seqs" in proc.stdout
    assert not (out / "trials").exists() and not (out / "mlflow.db").exists()
    assert not (out / "tune").exists()
