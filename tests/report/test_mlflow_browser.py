"""The MLflow UI in headless Chromium on a finished study: the compare view shows knobs and key metrics.

A real MLflow server on a real store; the page is the one the study prints. The screenshot is kept
under test-artifacts/ (or $TEST_ARTIFACTS_DIR) for a person to look at.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from report_fixtures import SLA

from tuner.tracking.compare import COMPARE_METRICS
from tuner.tracking.mlflow_log import StudyTracker
from tuner.trial.result import TrialResult

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="headless chromium not installed")]
ROOT = Path(__file__).parents[2]
KNOBS = ["max_num_seqs", "block_size", "enable_chunked_prefill"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
            "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--window-size=3400,900", "--virtual-time-budget=30000",
            *extra, url]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def column_ids(dom: str) -> set[str]:
    """Column ids of the runs table's header cells: `metrics.`name`` and `params.`name`` (AG Grid)."""
    tags = re.findall(r'<div[^>]*role="columnheader"[^>]*>', dom)
    return {m.group(1) for t in tags if (m := re.search(r'col-id="([^"]+)"', t))}


def test_compare_view_shows_knobs_and_metrics_as_columns(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    db = tmp_path / "mlflow.db"
    tracker = StudyTracker(f"sqlite:///{db}", "browser-study", "browser-study", tmp_path / "art", sla=SLA)
    tracker.start()
    defaults = {"max_num_seqs": 256, "block_size": 16, "enable_chunked_prefill": True}
    for t in study_trials:
        if t.metrics:  # the fixture measures TTFT and E2EL; a real trial has every compare metric
            t.metrics.update({"p99_tpot_ms": 21.5, "p99_itl_ms": 40.25, "request_goodput": t.capacity or 0.0})
        tracker.log_trial(t, KNOBS, defaults)
    tracker.finish(True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "mlflow server did not start"
            time.sleep(1)
        url = f"http://127.0.0.1:{port}/{tracker.view_path}"
        proc = chromium(url, tmp_path / "profile", "--dump-dom")
        assert proc.returncode == 0, proc.stderr[-2000:]
        dom = proc.stdout
        art = Path(os.environ.get("TEST_ARTIFACTS_DIR", ROOT / "test-artifacts"))
        art.mkdir(parents=True, exist_ok=True)
        shot = art / "mlflow_compare_view.png"
        chromium(url, tmp_path / "profile2", f"--screenshot={shot}")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
    columns = column_ids(dom)
    assert re.findall(r"<title>([^<]*)", dom)[0].startswith("Runs")  # an ML experiment: the runs table, not GenAI
    want = {f"params.`{k}`" for k in (*KNOBS, "outcome", "binding_sla")} | {f"metrics.`{m}`" for m in COMPARE_METRICS}
    assert want <= columns, sorted(want - columns)
    for t in study_trials:
        assert f"trial-{t.number:03d}-sim" in dom
    assert shot.exists() and shot.stat().st_size > 20_000
