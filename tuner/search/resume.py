"""The Optuna study on disk, and how a resumed driver continues from it.

The study lives in `<output>/optuna.db` (Optuna's RDB storage on SQLite; only the driver writes it),
beside the MLflow store, so `optuna-dashboard sqlite:///<output>/optuna.db` and Optuna's plots work
on it. A resumed driver loads that study (the sampler learns from Optuna's own history; nothing is
re-asked) and lines it up with trials.parquet, the record of finished trials:

- a trial in trials.parquet still RUNNING in Optuna (driver stopped before the tell) is told now;
- a trial RUNNING in Optuna but not in trials.parquet never finished: it is marked FAIL with
  `servetune.interrupted` and its config is launched again first (its number is free again);
- a failure Optuna heard of but trials.parquet missed (an actor crash is told before it is recorded)
  comes back as a TrialResult for the driver to record;
- a folder from before optuna.db existed has its parquet trials added to a new Optuna study.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna

from tuner.search import attrs as s
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

if TYPE_CHECKING:
    from tuner.search.searcher import SearchCore

log = logging.getLogger(__name__)
OPTUNA_DB = "optuna.db"
_RUNNING = optuna.trial.TrialState.RUNNING


def storage_url(out: Path) -> str:
    return f"sqlite:///{(out / OPTUNA_DB).resolve()}"


def open_storage(out: Path, study_name: str, *, fresh: bool) -> optuna.storages.RDBStorage:
    """The output folder's Optuna storage; `fresh` (a new study in an old folder) drops its old study."""
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(storage_url(out))
    if fresh and any(st.study_name == study_name for st in storage.get_all_studies()):
        optuna.delete_study(study_name=study_name, storage=storage)
    return storage


def resume_core(core: SearchCore, done: list[TrialResult]) -> list[TrialResult]:
    """Line the loaded Optuna study up with trials.parquet (`done`); returns failures only Optuna had."""
    from tuner.search.ask_tell import TrialReport

    by_number = {t.number: t for t in done}
    mine: dict[int, optuna.trial.FrozenTrial] = {}
    for ft in core.optuna.get_trials(deepcopy=False):
        attrs = ft.user_attrs
        if s.A_REJECTED in attrs:
            core.rejected.append({"engine": attrs.get(s.A_ENGINE, "?"), "reason": attrs[s.A_REJECTED],
                                  "params": _unprefixed(ft.params, attrs.get(s.A_ENGINE, ""))})
        elif s.A_DUPLICATE in attrs:
            core.duplicates += 1
        elif s.A_NUMBER in attrs and not attrs.get(s.A_INTERRUPTED):
            mine[int(attrs[s.A_NUMBER])] = ft
    recovered: list[TrialResult] = []
    for number, ft in sorted(mine.items()):
        if number in by_number:
            continue
        if ft.state == _RUNNING:
            _interrupt(core, ft)
        elif ft.state == optuna.trial.TrialState.FAIL:
            recovered.append(_recover(ft))
        else:  # cannot happen: trials.parquet is written before Optuna is told of a finished run
            log.warning("Optuna trial %d (servetune trial %d) finished but is not in trials.parquet",
                        ft.number, number)
    for t in sorted([*done, *recovered], key=lambda t: t.number):
        told = mine.get(t.number)
        trial: optuna.Trial | None = None
        if told is None:  # an output folder from before optuna.db: add the trial to the new study
            trial = core.baseline_trial(t.engine) if t.baseline else core.fixed_trial(t.engine, t.params)
            trial.set_user_attr(s.A_TRIAL_ID, t.trial_id)
        elif told.state == _RUNNING:
            trial = optuna.Trial(core.optuna, told._trial_id)
        if t.baseline and t.engine in core._baselines:
            core._baselines.remove(t.engine)
        core._launch(trial, t.engine, dict(t.params), dict(t.args), list(t.notes), baseline=t.baseline,
                     number=t.number)
        core.tell(t.number, TrialReport.of(core.study, t))
    core.continue_numbering(t.number for t in [*done, *recovered])
    return recovered


def _interrupt(core: SearchCore, ft: optuna.trial.FrozenTrial) -> None:
    """A trial the stopped driver never finished: FAIL it in Optuna and launch its config again."""
    trial = optuna.Trial(core.optuna, ft._trial_id)
    trial.set_user_attr(s.A_INTERRUPTED, True)
    core.optuna.tell(trial, state=optuna.trial.TrialState.FAIL)
    if not ft.user_attrs.get(s.A_BASELINE) and ft.params:  # a baseline is launched again as the baseline
        core._warm.append(dict(ft.params))


def _recover(ft: optuna.trial.FrozenTrial) -> TrialResult:
    a = ft.user_attrs
    try:
        outcome = TrialOutcome(a.get(s.A_OUTCOME, "crashed"))
    except ValueError:
        outcome = TrialOutcome.CRASHED
    return TrialResult(
        trial_id=str(a.get(s.A_TRIAL_ID) or f"optuna-{ft.number}"), number=int(a[s.A_NUMBER]),
        engine=str(a.get(s.A_ENGINE, "?")), params=dict(a.get(s.A_PARAMS) or {}), args=dict(a.get(s.A_ARGS) or {}),
        outcome=outcome, reason=str(a.get(s.A_REASON) or "failed (recorded by the searcher before the driver stopped)"),
        baseline=bool(a.get(s.A_BASELINE)), notes=list(a.get(s.A_NOTES) or []),
    )


def _unprefixed(params: dict[str, Any], engine: str) -> dict[str, Any]:
    pre = f"{engine}."
    return {k[len(pre):]: v for k, v in params.items() if k.startswith(pre)}
