"""report.html: written atomically, self-contained, with every trial and the study's answer."""

from __future__ import annotations

import re
from pathlib import Path

from report_fixtures import LAT, OBJ, SLA

from tuner.tracking.plots import figures
from tuner.tracking.report import write_figure_files, write_report
from tuner.trial.result import TrialResult


def test_report_is_self_contained_and_lists_every_trial(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    out = tmp_path / "out"
    path = write_report(out, study_name="demo<study>", trials=study_trials, sla=SLA, objective_metric=OBJ,
                        latency_metric=LAT, promoted_trial_id="t001", baseline_trial_id="t000")
    assert path == out / "report.html"
    text = path.read_text()
    assert [p.name for p in out.iterdir()] == ["report.html"]  # no temp file left behind
    assert "demo&lt;study&gt;" in text and "demo<study>" not in text
    assert not re.search(r"<script[^>]+src=", text)  # plotly.js inline, nothing fetched
    assert "Plotly.newPlot" in text and len(text) > 1_000_000
    for name in ("pareto", "latency_cdf", "parallel_coordinates"):
        assert f'id="fig-{name}"' in text
    rows = re.findall(r'<tr class="([a-z]*)" data-trial="(t\d+)">', text)
    assert [r[1] for r in rows] == [t.trial_id for t in study_trials]
    assert dict((tid, role) for role, tid in rows)["t001"] == "promoted"
    assert re.search(r'data-trial="t000">(?:<td[^>]*>[^<]*</td>){9}<td>engine defaults</td>', text)
    assert "KV cache does not fit: 0.4 GiB free" in text and "engine exited with status 1" in text
    gain = re.search(r'data-card="gain over baseline">gain over baseline<b>([^<]+)</b>', text)
    assert gain and gain.group(1) == "1.80x"


def test_report_without_feasible_trials_says_so(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    failed = [t for t in study_trials if not t.feasible]
    text = write_report(tmp_path, study_name="s", trials=failed, sla=SLA, objective_metric=OBJ,
                        latency_metric=LAT, promoted_trial_id=None, baseline_trial_id=None).read_text()
    assert "no trial met the SLA" in text
    assert re.search(r'gain over baseline<b>n/a</b>', text)


def test_figure_files_are_standalone_pages(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    figs = figures(study_trials, sla=SLA, objective_metric=OBJ, latency_metric=LAT, promoted_trial_id="t001",
                   baseline_trial_id="t000")
    paths = write_figure_files(tmp_path, figs)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "plots/pareto.html", "plots/latency_cdf.html", "plots/parallel_coordinates.html"]
    for p in paths:
        text = p.read_text()
        assert text.lower().startswith("<!doctype html>") and "Plotly.newPlot" in text
        assert re.search(r'<script[^>]+src="https://cdn.plot.ly/plotly-[0-9.]+\.min\.js"', text)
        assert p.stat().st_size < 500_000  # no inline plotly.js: one copy per study output, in report.html


def test_one_copy_of_plotly_js_per_study_output(tmp_path: Path, study_trials: list[TrialResult]) -> None:
    from plotly.offline import get_plotlyjs

    write_report(tmp_path, study_name="s", trials=study_trials, sla=SLA, objective_metric=OBJ, latency_metric=LAT,
                 promoted_trial_id="t001", baseline_trial_id="t000", figure_files=True)
    marker = get_plotlyjs()[:2000]
    copies = sum(f.read_text().count(marker) for f in tmp_path.rglob("*.html"))
    assert copies == 1
    total = sum(f.stat().st_size for f in tmp_path.rglob("*"))
    assert total < 1.5 * len(get_plotlyjs())
