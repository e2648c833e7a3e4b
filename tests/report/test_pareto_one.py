"""pareto.json and the report's Pareto figure come from one implementation and agree, including the
two-trial case where a trial over its SLA (measured at its lowest load) looks faster and busier."""

from __future__ import annotations

import json
from pathlib import Path

from report_fixtures import LAT, OBJ, make_trial

from tuner.run.outputs import write_pareto
from tuner.spec.sla import parse_sla
from tuner.tracking.plots import pareto_figure, pareto_ids
from tuner.trial.outcome import TrialOutcome


def test_pareto_json_and_report_agree(tmp_path: Path) -> None:
    feasible = make_trial(tmp_path, 0, TrialOutcome.OK, tput=1000, p99=300)
    over_sla = make_trial(tmp_path, 1, TrialOutcome.SLA_VIOLATED, tput=2000, p99=200)
    trials = [feasible, over_sla]
    write_pareto(tmp_path / "pareto.json", trials, parse_sla(["p99_ttft_ms <= 500"]), OBJ, LAT)
    doc = json.loads((tmp_path / "pareto.json").read_text())
    in_json = {p["trial_id"] for p in doc["front"]}
    flagged = {p["trial_id"] for p in doc["points"] if p["pareto"]}
    in_report = pareto_ids(trials, OBJ, LAT)
    assert in_json == flagged == in_report == {"t000"}
    fig = pareto_figure(trials, parse_sla(["p99_ttft_ms <= 500"]), OBJ, LAT, None)
    front_traces = [tr for tr in fig.data if "front" in (tr.name or "").lower()]
    assert front_traces and {round(x) for tr in front_traces for x in tr.x} == {300}


def test_latency_plots_show_the_slas_own_terms(tmp_path: Path) -> None:
    from tuner.tracking.plots import latency_cdf_figure

    sla = parse_sla(["p99_ttft_ms <= 1000", "p99_tpot_ms <= 50", "p99_itl_ms <= 100"])
    best = make_trial(tmp_path, 1, TrialOutcome.OK, tput=1500, p99=400)
    base = make_trial(tmp_path, 0, TrialOutcome.OK, tput=1000, p99=300, baseline=True)
    fig = latency_cdf_figure(best, base, sla, LAT)
    titles = [a.text for a in fig.layout.annotations if a.text in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")]
    assert titles == ["ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"]
    itl = [tr for tr in fig.data if tr.xaxis == "x3"]
    assert itl and all(abs(x - 20.0) < 1e-6 for x in itl[0].x[:5]), "ITL panel: pooled token gaps (20 ms here)"
    limits = {a.text for a in fig.layout.annotations} & {str(t) for t in sla}
    assert limits == {str(t) for t in sla}, "each SLA term's limit is drawn on its panel"
