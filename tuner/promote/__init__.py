"""Promotion: the confirmed, SLA-feasible winner of a study, registered in MLflow and served by Ray Serve.

    select (Pareto + SLA + confirmation re-runs, worst case) -> register ``<study>-config``
    -> promoted.yaml -> [deploy to staging + smoke test] -> aliases staging / previous-staging

The CLI is ``python -m tuner.promote`` (see docs/promote.md).
"""

from tuner.promote.pipeline import PromotionResult, promote_study
from tuner.trial.pareto import pareto_front

__all__ = ["PromotionResult", "pareto_front", "promote_study"]
