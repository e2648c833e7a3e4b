"""Secrets planted everywhere a user can put one (an engine env token, the password and a token in the
tracking URI) never appear, byte for byte, in any file under the output folder, the MLflow server's store
and artifacts, the Ray session folder, or the run's stdout/stderr. Real Ray, real sim-server trials,
a real `mlflow server` process; the study promotes (registry, Serve config) so those paths are searched too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from mlflow_server import MlflowServer
from relhelp import RAY_ENV, fault_study_data

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # Ray and an mlflow server on a busy CI box
HF = "hf_PlAnTeDtOkEn0123456789"
PW = "pw-PlAnTeD-s3cr3t-4242"
SECRETS = (HF, PW)


def hits(root: Path) -> list[str]:
    found = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                data = p.read_bytes()
            except OSError:
                continue
            found += [f"{p}: {s[:6]}..." for s in SECRETS if s.encode() in data]
    return found


def test_planted_secrets_reach_no_file_and_no_output(tmp_path: Path) -> None:
    server = MlflowServer(tmp_path / "mlflow").start()
    ray_tmp = Path(tempfile.mkdtemp(prefix="st-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    try:
        data = fault_study_data({}, name="planted", budget={"trials": 2, "max_concurrent": 1},
                                promotion={"enabled": True, "confirm_runs": 0, "top_k": 1})
        data["engines"] = {"vllm": {"env": {"HF_TOKEN": HF}}}
        data["tracking"] = {"mlflow_uri": f"http://alice:{PW}@127.0.0.1:{server.port}"}
        study = tmp_path / "planted.yaml"
        study.write_text(yaml.safe_dump(data))
        out = tmp_path / "out"
        env = {**os.environ, "PYTHONPATH": str(ROOT), **RAY_ENV, "RAY_TMPDIR": str(ray_tmp), "HF_TOKEN": HF}
        proc = subprocess.run([sys.executable, "-m", "tuner.run", "--study", str(study), "--output", str(out)],
                              cwd=ROOT, env=env, capture_output=True, timeout=900)
        text = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
        assert proc.returncode in (0, 3), text[-4000:]
        assert "View run" not in text or "alice" not in text
        leaks = [f"stdout: {s[:6]}" for s in SECRETS if s.encode() in proc.stdout]
        leaks += [f"stderr: {s[:6]}" for s in SECRETS if s.encode() in proc.stderr]
        leaks += hits(out) + hits(server.root) + hits(ray_tmp)
        assert leaks == [], leaks
        assert (out / "trials.parquet").exists() and list(ray_tmp.rglob("session_*")), "nothing was searched"
        assert any((server.root / "artifacts").rglob("*")), "no artifact reached the server"
    finally:
        server.stop()
        shutil.rmtree(ray_tmp, ignore_errors=True)
