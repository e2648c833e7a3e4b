"""report.html: one self-contained page (plotly.js inline) a user can open or mail without a server.

It shows the study's answer first (promoted config and its gain over the baseline), then the Pareto
front, the latency CDF, parameters vs objective, and every trial with its outcome and reason.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from tuner.common.atomic import write_text
from tuner.spec.sla import SLATerm
from tuner.tracking.plots import best_feasible, figures
from tuner.trial.result import TrialResult

FIGURE_TITLES = {
    "pareto": "Pareto front",
    "latency_cdf": "Latency CDF: promoted vs baseline",
    "parallel_coordinates": "Parameters vs objective",
}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2em}
.cards{display:flex;gap:1em;flex-wrap:wrap;margin:1.5em 0}
.card{border:1px solid #ddd;border-radius:6px;padding:.8em 1.2em;min-width:160px}
.card b{display:block;font-size:1.4em}
table{border-collapse:collapse;width:100%;font-size:.85em}
th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f6f6f6;position:sticky;top:0}
tr.promoted{background:#fff3e0}tr.baseline{background:#e8f5e9}
.ok{color:#1b7f1b}.bad{color:#b71c1c}code{font-size:.95em}
"""


def write_report(
    output_dir: Path,
    *,
    study_name: str,
    trials: list[TrialResult],
    sla: list[SLATerm],
    objective_metric: str,
    latency_metric: str,
    promoted_trial_id: str | None,
    baseline_trial_id: str | None,
    figure_files: bool = False,
    confirmed: dict[str, Any] | None = None,
) -> Path:
    """Write ``output_dir/report.html`` atomically and return its path; with `figure_files` also each plot
    as ``output_dir/plots/<name>.html`` (for the study's MLflow run)."""
    figs = figures(trials, sla=sla, objective_metric=objective_metric, latency_metric=latency_metric,
                   promoted_trial_id=promoted_trial_id, baseline_trial_id=baseline_trial_id)
    page = render_html(figs, study_name=study_name, trials=trials, sla=sla, objective_metric=objective_metric,
                       latency_metric=latency_metric, promoted_trial_id=promoted_trial_id,
                       baseline_trial_id=baseline_trial_id, confirmed=confirmed)
    path = output_dir / "report.html"
    write_text(path, page)
    if figure_files:
        write_figure_files(output_dir, figs)
    return path


def write_figure_files(output_dir: Path, figs: dict[str, go.Figure]) -> list[Path]:
    """Each figure as its own small HTML page (``plots/<name>.html``), for the study's MLflow run.

    One copy of plotly.js per study output: report.html holds it (the self-contained page that works
    offline); these pages load plotly.js from its CDN (tens of KB each instead of 4.8 MB), so they
    render in the MLflow UI wherever the browser reaches the internet; offline, open report.html.
    """
    paths = []
    for name, fig in figs.items():
        path = output_dir / "plots" / f"{name}.html"
        write_text(path, fig.to_html(full_html=True, include_plotlyjs="cdn", config={"displaylogo": False}))
        paths.append(path)
    return paths


def render_html(
    figs: dict[str, go.Figure],
    *,
    study_name: str,
    trials: Sequence[TrialResult],
    sla: Sequence[SLATerm],
    objective_metric: str,
    latency_metric: str,
    promoted_trial_id: str | None,
    baseline_trial_id: str | None,
    confirmed: dict[str, Any] | None = None,
) -> str:
    """The whole page as a string; plotly.js is embedded once in the head."""
    e = html.escape
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sections = []
    for name, fig in figs.items():
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{name}",
                          config={"displaylogo": False, "responsive": True})
        sections.append(f'<section class="figure" data-figure="{e(name)}"><h2>{e(FIGURE_TITLES.get(name, name))}'
                        f"</h2>{div}</section>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>servetune: {e(study_name)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f"<h1>servetune study <code>{e(study_name)}</code></h1>"
        f'<p class="sub">generated {when} &middot; objective <code>{e(objective_metric)}</code> at the highest '
        f"load meeting the SLA &middot; SLA: {e(', '.join(str(t) for t in sla) or 'none')}</p>"
        + _cards(trials, objective_metric, promoted_trial_id, baseline_trial_id, confirmed)
        + "".join(sections)
        + "<h2>Trials</h2>"
        + trial_table(trials, objective_metric, latency_metric, promoted_trial_id, baseline_trial_id)
        + "</body></html>\n"
    )


def _cards(trials: Sequence[TrialResult], objective_metric: str, promoted_trial_id: str | None,
           baseline_trial_id: str | None, confirmed: dict[str, Any] | None = None) -> str:
    """The study's answer. With `confirmed` (the promotion's figures: promoted and baseline worst cases
    over the same confirmation seeds, their ratio, whether the defaults won) the cards quote exactly
    what the promotion decided on, not the single search runs."""
    by_id = {t.trial_id: t for t in trials}
    counts = Counter(t.outcome.value for t in trials)
    promoted = by_id.get(promoted_trial_id or "")
    baseline = by_id.get(baseline_trial_id or "")
    best = promoted or best_feasible(trials)
    cards = [("trials", str(len(trials)), ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))]
    if best is not None:
        cards.append(("promoted" if promoted else "best feasible (not promoted)", _fmt(best.objective),
                      f"trial {best.number} ({best.engine})"))
    else:
        cards.append(("best feasible", "none", "no trial met the SLA"))
    if baseline is not None:
        cards.append(("baseline", _fmt(baseline.objective) if baseline.feasible else baseline.outcome.value,
                      f"trial {baseline.number}"))
    ratio = _ratio(best, baseline)
    note = objective_metric if ratio else "baseline missing or not SLA-feasible"
    if confirmed is not None and confirmed.get("gain") is not None:
        ratio, note = confirmed["gain"], f"{objective_metric}, confirmed worst case vs the defaults' (same seeds)"
        cards[1] = (cards[1][0], _fmt(confirmed.get("promoted")), cards[1][2] + ", confirmed worst case")
        if baseline is not None and confirmed.get("baseline") is not None:
            cards[2] = ("baseline", _fmt(confirmed["baseline"]), f"trial {baseline.number}, confirmed worst case")
    if confirmed is not None and confirmed.get("defaults_won"):
        note = "the engine defaults win: no tuned config beat them by more than run-to-run noise"
    cards.append(("gain over baseline", f"{ratio:.2f}x" if ratio else "n/a", note))
    return '<div class="cards">' + "".join(
        f'<div class="card" data-card="{html.escape(k)}">{html.escape(k)}<b>{html.escape(v)}</b>'
        f"<small>{html.escape(s)}</small></div>" for k, v, s in cards) + "</div>"


def trial_table(trials: Sequence[TrialResult], objective_metric: str, latency_metric: str,
                promoted_trial_id: str | None, baseline_trial_id: str | None) -> str:
    """Every trial in number order, with its outcome and the reason for it."""
    e = html.escape
    head = ["#", "trial", "engine", "outcome", "reason", "capacity", "bound by", objective_metric, latency_metric,
            "params", "output-changing", "wall s"]
    rows = []
    for t in sorted(trials, key=lambda t: t.number):
        role = "promoted" if t.trial_id == promoted_trial_id else "baseline" if t.trial_id == baseline_trial_id else ""
        params = ", ".join(f"{k}={v}" for k, v in sorted(t.params.items())) or (
            "engine defaults" if t.baseline else "")
        cells = [str(t.number), t.trial_id + (f" ({role})" if role else ""), t.engine, t.outcome.value,
                 t.reason, _fmt(t.capacity), t.binding or "", _fmt(t.objective if t.feasible else None),
                 _fmt(t.latency(latency_metric)), params,
                 (", ".join(t.labels) + f" (output check: {t.output_check or 'not recorded'})") if t.labels else "",
                 f"{t.wall_s:.1f}"]
        klass = "ok" if t.feasible else "bad"
        tds = "".join(f'<td class="{klass}">{e(c)}</td>' if i == 3 else f"<td>{e(c)}</td>"
                      for i, c in enumerate(cells))
        rows.append(f'<tr class="{role}" data-trial="{e(t.trial_id)}">{tds}</tr>')
    return ('<table id="trials"><thead><tr>' + "".join(f"<th>{e(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _ratio(best: TrialResult | None, baseline: TrialResult | None) -> float | None:
    if best is None or baseline is None or not best.feasible or not baseline.feasible:
        return None
    if not best.objective or not baseline.objective:
        return None
    return best.objective / baseline.objective


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
