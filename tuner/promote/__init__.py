"""Promotion: the confirmed, SLA-feasible winner of a study, registered in MLflow and served by Ray Serve.

    select (Pareto + SLA + confirmation re-runs, worst case) -> register ``<study>-config``
    -> promoted.yaml -> [deploy to staging + smoke test] -> aliases staging / previous-staging

The CLI is ``python -m tuner.promote`` (see docs/promote.md).
"""

from typing import Any

__all__ = ["PromotionResult", "pareto_front", "promote_study"]


def __getattr__(name: str) -> Any:
    """Lazy: importing the package (e.g. for `python -m tuner.promote --help`) does not load MLflow."""
    if name in ("PromotionResult", "promote_study"):
        from tuner.promote import pipeline

        return getattr(pipeline, name)
    if name == "pareto_front":
        from tuner.trial.pareto import pareto_front

        return pareto_front
    raise AttributeError(name)
