"""optuna-dashboard opens a study's own Optuna storage (optuna.db in the output folder) and serves its trials."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.search.helpers import make_study, synthetic
from tuner.search.resume import open_storage, storage_url
from tuner.search.searcher import SearchCore
from tuner.search.space import build_space

DASHBOARD = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)) or shutil.which("optuna-dashboard")
pytestmark = pytest.mark.skipif(DASHBOARD is None, reason="optuna-dashboard not installed (pip install -e .[dev])")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_dashboard_serves_a_finished_study(tmp_path: Path) -> None:
    study = make_study(name="dash")
    space = build_space(study)
    core = SearchCore(study, space, storage=open_storage(tmp_path, study.name, fresh=True))
    for _ in range(4):
        cfg = core.ask()
        assert cfg is not None
        core.bind(cfg.number, f"tune-{cfg.number}")
        core.tell(cfg.number, synthetic(space, cfg))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([DASHBOARD or "optuna-dashboard", storage_url(tmp_path), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                studies = _get(f"http://127.0.0.1:{port}/api/studies")["study_summaries"]
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                assert time.monotonic() < deadline, "optuna-dashboard did not answer"
                time.sleep(1)
        (entry,) = [s for s in studies if s["study_name"] == "dash"]
        detail = _get(f"http://127.0.0.1:{port}/api/studies/{entry['study_id']}?after=0")
        assert len(detail["trials"]) == 4
        assert {t["state"] for t in detail["trials"]} - {"Complete", "Fail"} == set(), detail["trials"]
        assert any(t["state"] == "Complete" for t in detail["trials"])
        importances = _get(f"http://127.0.0.1:{port}/api/studies/{entry['study_id']}/param_importances")
        assert importances["param_importances"], importances  # Optuna's own analysis runs on the stored study
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
