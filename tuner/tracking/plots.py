"""The study's figures, built from finished trials; the HTML report and MLflow artifacts both use them.

Every figure is a plain plotly Figure so it can be written as self-contained HTML or as an image.
Failed trials are never drawn as zero throughput: they have no point on the Pareto plot and an explicit
"no result" level on the parallel-coordinates objective axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tuner.common.atomic import read_table
from tuner.common.metric_keys import split_latency
from tuner.common.numeric import finite_float
from tuner.spec.sla import SLATerm
from tuner.trial.pareto import study_front
from tuner.trial.result import TrialResult

MISSING = "n/a"
COLORS = {"feasible": "#1f77b4", "infeasible": "#d62728", "promoted": "#ff7f0e", "baseline": "#2ca02c"}


def figures(
    trials: Sequence[TrialResult],
    *,
    sla: Sequence[SLATerm],
    objective_metric: str,
    latency_metric: str,
    promoted_trial_id: str | None,
    baseline_trial_id: str | None,
) -> dict[str, go.Figure]:
    """All report figures by artifact name (``pareto``, ``latency_cdf``, ``parallel_coordinates``)."""
    by_id = {t.trial_id: t for t in trials}
    promoted = by_id.get(promoted_trial_id) if promoted_trial_id else None
    baseline = by_id.get(baseline_trial_id) if baseline_trial_id else None
    return {
        "pareto": pareto_figure(trials, sla, objective_metric, latency_metric, promoted_trial_id,
                                baseline_trial_id),
        "latency_cdf": latency_cdf_figure(promoted or best_feasible(trials), baseline, sla, latency_metric,
                                          promoted is not None),
        "parallel_coordinates": parallel_coordinates_figure(trials, objective_metric),
    }


def best_feasible(trials: Sequence[TrialResult]) -> TrialResult | None:
    """The SLA-feasible trial with the highest objective (None when no trial met the SLA)."""
    ok = [t for t in trials if t.feasible and t.objective is not None]
    return max(ok, key=lambda t: (t.objective, -t.number)) if ok else None


def pareto_ids(trials: Sequence[TrialResult], objective_metric: str, latency_metric: str) -> set[str]:
    """The study's Pareto front (tuner.trial.pareto.study_front: the same one pareto.json holds)."""
    return {t.trial_id for t in study_front(trials, objective_metric, latency_metric)}


def pareto_figure(
    trials: Sequence[TrialResult],
    sla: Sequence[SLATerm],
    objective_metric: str,
    latency_metric: str,
    promoted_trial_id: str | None,
    baseline_trial_id: str | None = None,
) -> go.Figure:
    """Throughput vs P99 latency at each trial's capacity; every measured load point in the background."""
    fig = go.Figure()
    bg_x, bg_y, bg_text = [], [], []
    for t in trials:
        for p in t.points:
            x, y = finite_float(p.get(latency_metric)), finite_float(p.get(objective_metric))
            if x is not None and y is not None:
                bg_x.append(x)
                bg_y.append(y)
                bg_text.append(f"trial {t.number} load {p.get('load')} {'ok' if p.get('feasible') else 'over SLA'}")
    if bg_x:
        fig.add_trace(go.Scatter(x=bg_x, y=bg_y, mode="markers", name="all load points", text=bg_text,
                                 hoverinfo="text+x+y", marker={"size": 5, "color": "#bbbbbb", "opacity": 0.6}))
    front = pareto_ids(trials, objective_metric, latency_metric)
    groups: dict[str, list[TrialResult]] = {"feasible": [], "infeasible": []}
    for t in trials:
        if _xy(t, objective_metric, latency_metric) is not None:
            groups["feasible" if t.feasible else "infeasible"].append(t)
    for name, members in groups.items():
        if members:
            fig.add_trace(_trial_trace(members, name, objective_metric, latency_metric,
                                       {"size": 10, "color": COLORS[name],
                                        "symbol": "circle" if name == "feasible" else "x"}))
    front_xy = sorted(xy for t in trials if t.trial_id in front
                      for xy in [_xy(t, objective_metric, latency_metric)] if xy is not None)
    if front_xy:
        fig.add_trace(go.Scatter(x=[x for x, _ in front_xy], y=[y for _, y in front_xy], mode="lines",
                                 name="Pareto front", line={"color": COLORS["feasible"], "dash": "dot"}))
    baseline = next((t for t in trials if t.trial_id == baseline_trial_id), None)
    if baseline is not None and _xy(baseline, objective_metric, latency_metric) is not None:
        fig.add_trace(_trial_trace([baseline], "baseline", objective_metric, latency_metric,
                                   {"size": 14, "color": COLORS["baseline"], "symbol": "diamond",
                                    "line": {"width": 1, "color": "black"}}))
    promoted = next((t for t in trials if t.trial_id == promoted_trial_id), None)
    if promoted is not None and _xy(promoted, objective_metric, latency_metric) is not None:
        fig.add_trace(_trial_trace([promoted], "promoted", objective_metric, latency_metric,
                                   {"size": 18, "color": COLORS["promoted"], "symbol": "star",
                                    "line": {"width": 1, "color": "black"}}))
    for term in sla:
        if term.metric == latency_metric:
            fig.add_vline(x=term.limit, line={"color": COLORS["infeasible"], "dash": "dash"},
                          annotation_text=f"SLA {term}", annotation_position="top left")
    fig.update_xaxes(range=[0, _x_max(trials, sla, objective_metric, latency_metric)])
    fig.update_layout(title="Throughput vs latency at each trial's SLA capacity",
                      xaxis_title=latency_metric, yaxis_title=objective_metric, template="plotly_white",
                      legend={"orientation": "h", "y": -0.2})
    return fig


def latency_cdf_figure(
    best: TrialResult | None,
    baseline: TrialResult | None,
    sla: Sequence[SLATerm],
    latency_metric: str,
    best_is_promoted: bool = True,
) -> go.Figure:
    """Per-request latency CDFs of the chosen config against the baseline, at each one's capacity: one
    panel for the latency metric, one for every latency the SLA limits (TPOT, ITL...), then E2EL."""
    parts = split_latency(latency_metric)
    base_col = f"{parts[1]}_ms" if parts else "ttft_ms"  # records.parquet columns: ttft_ms, tpot_ms, e2el_ms
    terms = [f"{t.latency[1]}_ms" for t in sla if t.latency is not None]
    columns = list(dict.fromkeys([base_col, *terms, "e2el_ms"]))
    fig = make_subplots(rows=1, cols=len(columns), subplot_titles=columns)
    label = "promoted" if best_is_promoted else "best feasible"
    series = [(label, best, COLORS["promoted"])]
    if baseline is not None and (best is None or baseline.trial_id != best.trial_id):
        series.append(("baseline", baseline, COLORS["baseline"]))
    drawn = 0
    for col_i, column in enumerate(columns, start=1):
        for name, trial, color in series:
            if trial is None:
                continue
            values = latency_samples(trial, column)
            if not values:
                continue
            values.sort()
            n = len(values)
            fig.add_trace(go.Scatter(x=values, y=[(i + 1) / n for i in range(n)], mode="lines",
                                     name=f"{name} (trial {trial.number})", legendgroup=name,
                                     showlegend=col_i == 1, line={"color": color}), row=1, col=col_i)
            drawn += 1
        for term in sla:
            if term.latency is not None and f"{term.latency[1]}_ms" == column:
                fig.add_vline(x=term.limit, line={"color": COLORS["infeasible"], "dash": "dash"}, row=1, col=col_i,
                              annotation_text=str(term), annotation_position="top")
        fig.add_hline(y=0.99, line={"color": "#888888", "dash": "dot"}, row=1, col=col_i)
    if not drawn:
        fig.add_annotation(text="no per-request records for the promoted or baseline trial", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_layout(title="Latency CDF at capacity: promoted vs baseline", template="plotly_white",
                      yaxis_title="fraction of requests", legend={"orientation": "h", "y": -0.2})
    fig.update_xaxes(title_text="ms")
    return fig


def parallel_coordinates_figure(trials: Sequence[TrialResult], objective_metric: str) -> go.Figure:
    """Every trial's parameters against its objective; trials without a result sit on a 'no result' level."""
    names = sorted({k for t in trials for k in t.params})
    dims: list[dict[str, Any]] = []
    engines = {t.engine for t in trials}
    if len(engines) > 1:
        dims.append(_categorical_dim("engine", [t.engine for t in trials]))
    for name in names:
        # A trial that did not sample a parameter (the baseline: engine defaults) ran with the value the
        # engine reported; only when that is unknown too does it sit on the "n/a" level.
        values = [t.params.get(name, t.resolved.get(name)) for t in trials]
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            dims.append(_numeric_dim(name, [finite_float(v) for v in values]))
        else:
            dims.append(_categorical_dim(name, values))
    dims.append(_categorical_dim("outcome", [t.outcome.value for t in trials]))
    objective = [t.objective if t.feasible else None for t in trials]
    dims.append(_numeric_dim(objective_metric, objective, missing_label="no result"))
    color = dims[-1]["values"]
    fig = go.Figure(go.Parcoords(dimensions=dims, line={"color": color, "colorscale": "Viridis",
                                                         "showscale": True}))
    fig.update_layout(title=f"Parameters vs {objective_metric} (SLA-feasible trials; others at 'no result')",
                      template="plotly_white", margin={"l": 80, "r": 80})
    return fig


def _trial_trace(members: list[TrialResult], name: str, objective_metric: str, latency_metric: str,
                 marker: dict[str, Any]) -> go.Scatter:
    xys = [_xy(t, objective_metric, latency_metric) or (None, None) for t in members]
    return go.Scatter(
        x=[x for x, _ in xys], y=[y for _, y in xys],
        mode="markers", name=name, marker=marker, hoverinfo="text",
        text=[f"trial {t.number} ({t.engine}) {t.outcome.value}<br>"
              + "<br>".join(f"{k}={v}" for k, v in sorted(t.params.items())) for t in members])


def _x_max(trials: Sequence[TrialResult], sla: Sequence[SLATerm], objective_metric: str,
           latency_metric: str) -> float:
    """Show every trial and the SLA line; far-out load points (past saturation) are a zoom-out away."""
    xs = [xy[0] for t in trials for xy in [_xy(t, objective_metric, latency_metric)] if xy is not None]
    xs += [term.limit for term in sla if term.metric == latency_metric]
    if not xs:
        xs = [x for t in trials for p in t.points for x in [finite_float(p.get(latency_metric))] if x is not None]
    return 1.15 * max(xs, default=1.0)


def _xy(t: TrialResult, objective_metric: str, latency_metric: str) -> tuple[float, float] | None:
    """(latency, objective) at the trial's capacity point, or None when it has no such measurement."""
    lat = finite_float(t.metrics.get(latency_metric))
    obj = finite_float(t.metrics.get(objective_metric, t.objective))
    return None if lat is None or obj is None else (lat, obj)


def latency_samples(trial: TrialResult, column: str) -> list[float]:
    """Per-request latencies (ms) of successful requests at the trial's capacity point.

    Reads the trial's per-request Parquet; a missing latency column is recomputed from the
    sent/first-token/done timestamps. If the file holds several load points (a ``load`` column),
    only the capacity point's requests are kept, so the CDF matches the reported P99.
    """
    if not trial.records_path:
        return []
    try:
        table = read_table(Path(trial.records_path))
    except (OSError, ValueError):
        return []
    cols = table.to_pydict()
    n = table.num_rows
    keep = [True] * n
    if "error" in cols:
        keep = [k and (e is None or e == "") for k, e in zip(keep, cols["error"], strict=True)]
    if "warmup" in cols:
        keep = [k and not w for k, w in zip(keep, cols["warmup"], strict=True)]
    if "load" in cols and trial.capacity is not None:
        loads = cols["load"]
        keep = [k and finite_float(x) is not None and math.isclose(float(x), trial.capacity, rel_tol=1e-6)
                for k, x in zip(keep, loads, strict=True)]
    if column == "itl_ms":  # ITL is pooled over every token gap of every kept request, as its P99 is
        gaps: list[float] = []
        for k, tt in zip(keep, cols.get("token_times") or [None] * n, strict=True):
            if k and tt:
                gaps += [(b - a) * 1000.0 for a, b in zip(tt, tt[1:], strict=False)
                         if finite_float(a) is not None and finite_float(b) is not None]
        return gaps
    values = cols.get(column)
    if values is None or all(v is None for v in values):
        values = _recompute(cols, column, n)
    return [float(v) for k, v in zip(keep, values, strict=True) if k and finite_float(v) is not None]


def _recompute(cols: dict[str, list[Any]], column: str, n: int) -> list[float | None]:
    sent, first, done = cols.get("sent_s"), cols.get("first_token_s"), cols.get("done_s")
    toks = cols.get("output_tokens")
    out: list[float | None] = [None] * n
    for i in range(n):
        s = sent[i] if sent else None
        f = first[i] if first else None
        d = done[i] if done else None
        if s is None:
            continue
        if column == "ttft_ms" and f is not None:
            out[i] = (f - s) * 1000.0
        elif column == "e2el_ms" and d is not None:
            out[i] = (d - s) * 1000.0
        elif column == "tpot_ms" and f is not None and d is not None and toks and (toks[i] or 0) >= 2:
            out[i] = (d - f) * 1000.0 / (toks[i] - 1)
    return out


def _numeric_dim(label: str, values: list[float | None], missing_label: str = MISSING) -> dict[str, Any]:
    """A numeric axis; missing values get their own labelled level below the range."""
    present = [v for v in values if v is not None]
    if not present:
        return {"label": label, "values": [0.0] * len(values), "tickvals": [0.0], "ticktext": [missing_label]}
    lo, hi = min(present), max(present)
    if len(present) == len(values):
        return {"label": label, "values": present, "range": [lo, hi] if hi > lo else [lo - 1, hi + 1]}
    span = (hi - lo) or max(abs(hi), 1.0)
    sentinel = lo - 0.25 * span
    ticks = [lo + span * i / 4 for i in range(5)] if hi > lo else [lo]
    return {"label": label, "values": [sentinel if v is None else v for v in values],
            "range": [sentinel, max(hi, lo + span)],
            "tickvals": [sentinel, *ticks], "ticktext": [missing_label, *(f"{v:.4g}" for v in ticks)]}


def _categorical_dim(label: str, values: list[Any]) -> dict[str, Any]:
    texts = [MISSING if v is None else str(v) for v in values]
    levels = sorted(set(texts), key=lambda s: (s == MISSING, s))
    code = {s: i for i, s in enumerate(levels)}
    return {"label": label, "values": [code[s] for s in texts], "tickvals": list(range(len(levels))),
            "ticktext": levels, "range": [-0.5, len(levels) - 0.5]}


