"""report.html opened in headless Chromium: every figure must actually render (plotly ran, SVG drawn)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_fixtures import LAT, OBJ, SLA

from tuner.tracking.report import write_report
from tuner.trial.result import TrialResult

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason="headless chromium not installed")]


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after scripts ran; virtual time lets plotly finish without real waiting."""
    argv = [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
            "--virtual-time-budget=15000", "--dump-dom", page.as_uri()]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_report_renders_all_plots_in_chromium(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    page = write_report(tmp_path / "out", study_name="browser", trials=study_trials, sla=SLA,
                        objective_metric=OBJ, latency_metric=LAT, promoted_trial_id="t002",
                        baseline_trial_id="t000")
    dom = dump_dom(page, tmp_path / "profile")
    sections = re.split(r'<section class="figure"', dom)[1:]
    assert len(sections) == 3
    for section in sections:
        name = re.match(r' data-figure="([a-z_]+)"', section)
        assert name, section[:200]
        assert 'class="main-svg"' in section, f"{name.group(1)} did not render"
    pareto = sections[0]
    assert pareto.count('class="point"') >= 7  # markers drawn: load points + trials + promoted star
    assert "SLA p99_ttft_ms" in pareto
    assert 'class="parcoords"' in sections[2] or "parcoords-lines" in sections[2]
    assert 'data-trial="t006"' in dom
