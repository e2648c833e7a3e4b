"""What every MLflow run of a study carries, so the UI's compare view lines trials up at a glance.

One short metric set on every child run (the columns users sort by), values rounded to what the
measurement supports (4 significant digits: the client's own error bar is about 1 ms, repeat runs
differ by a few percent); the knobs under their engine argument names, the same on trial runs and
on the promotion run; the outcome as a param and a tag; the SLA term that bound the capacity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.common.numeric import finite_float
from tuner.spec.sla import SLATerm
from tuner.trial.result import TrialResult

# The compare columns, in the order users read them (vLLM's names; tuner.common.metric_keys).
COMPARE_METRICS = (
    "objective", "sla_capacity", "output_throughput", "request_goodput", "p99_ttft_ms", "p99_tpot_ms",
    "p99_itl_ms", "p99_e2el_ms", "error_rate",
)
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"  # MLflow 3's UI: an ML experiment opens on its runs, not GenAI
EXPERIMENT_KIND = "custom_model_development"
SIGNIFICANT = 4
VIEW_KEY = "servetune"  # the saved view: experiment tag mlflow.sharedViewState.<key>, read by MLflow's UI
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"


def view_path(experiment_id: str) -> str:
    """The UI page (after the server root) that opens the runs table on the saved compare view."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}&workflowType=machine_learning"


def view_state(knobs: Sequence[str], parent_run_id: str | None) -> dict[str, Any]:
    """MLflow's shared view state: the compare metrics and the knobs as columns, best objective first."""
    columns = [f"params.`{k}`" for k in (*knobs, "outcome", "binding_sla")]
    columns += [f"metrics.`{m}`" for m in COMPARE_METRICS]
    return {"searchFilter": "", "orderByKey": "metrics.`objective`", "orderByAsc": False, "selectedColumns": columns,
            "columnOrder": ["attributes.`Run Name`", *columns],  # knobs first, then the metrics in our order
            "runsExpanded": {parent_run_id: True} if parent_run_id else {}}


def rounded(value: Any, digits: int = SIGNIFICANT) -> float | None:
    """`value` to `digits` significant digits; None when missing or not finite (never a fake zero)."""
    f = finite_float(value)
    if f is None:
        return None
    if f == 0:
        return 0.0
    return round(f, digits - 1 - int(math.floor(math.log10(abs(f)))))


def trial_metrics(t: TrialResult) -> dict[str, float]:
    """The compare set of one trial; keys without a value (a failed trial) are left out, not zeroed."""
    values: dict[str, Any] = {"objective": t.objective, "sla_capacity": t.capacity}
    values.update({k: t.metrics.get(k) for k in COMPARE_METRICS if k not in values})
    return {k: r for k, v in values.items() if (r := rounded(v)) is not None}


def knob_params(args: Mapping[str, Any], names: Sequence[str] = (), defaults: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """Engine arguments under their own names (`max_num_seqs`), every searched name present on every run."""
    out: dict[str, Any] = {}
    for name in names:
        out[name] = args.get(name, (defaults or {}).get(name, "default"))
    for k, v in args.items():
        out.setdefault(k, v)
    return out


def binding_term(t: TrialResult, sla: Sequence[SLATerm]) -> str | None:
    """Name of the SLA term that capped the capacity (tuner.trial.binding, the one implementation);
    None when no load point failed above it, or errors rather than a term broke it."""
    from tuner.trial.binding import binding

    b = binding(sla, t.points, t.capacity)
    return b.term.name if b is not None and b.term is not None else None
