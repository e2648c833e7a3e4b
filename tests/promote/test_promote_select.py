"""Selection: Pareto front, SLA filter, confirmation re-runs judged by their worst case."""

from __future__ import annotations

import pytest
from promote_factory import make_study, make_trial, rerun

from tuner.promote import pareto_front
from tuner.promote.select import confirmation_seeds, select
from tuner.trial.outcome import TrialOutcome


def test_pareto_front_keeps_only_non_dominated_trials_best_objective_first() -> None:
    a = make_trial(0, 1000, 300)  # fast but low throughput
    b = make_trial(1, 2000, 400)  # more throughput, more latency: on the front
    c = make_trial(2, 1500, 450)  # dominated by b (less throughput, more latency)
    d = make_trial(3, 2000, 350)  # dominates b
    e = make_trial(4, None, 100, outcome=TrialOutcome.OOM)
    front = pareto_front([a, b, c, d, e], "output_throughput", "p99_ttft_ms")
    assert [t.trial_id for t in front] == ["t003", "t000"]


def test_sla_violating_and_failed_trials_are_never_candidates() -> None:
    study = make_study()
    over_sla = make_trial(0, 9000, 800)  # highest objective, but p99 TTFT 800 > 500
    crashed = make_trial(1, None, 0, outcome=TrialOutcome.CRASHED)
    fine = make_trial(2, 1000, 200)
    sel = select(study, [over_sla, crashed, fine], confirm=None)
    assert sel.winner is not None and sel.winner.trial.trial_id == "t002"
    assert "not confirmed" in sel.reason


def test_nothing_promoted_says_why() -> None:
    study = make_study()
    sel = select(study, [make_trial(0, None, 0, outcome=TrialOutcome.OOM),
                         make_trial(1, None, 0, outcome=TrialOutcome.START_FAILED)], confirm=None)
    assert sel.winner is None
    assert "nothing promoted" in sel.reason and "oom" in sel.reason and "start_failed" in sel.reason
    sel = select(study, [make_trial(0, 5000, 900)], confirm=None)  # "ok" but metrics break the SLA
    assert sel.winner is None and "violate the SLA" in sel.reason


def test_worst_case_over_confirmations_picks_the_robust_candidate() -> None:
    study = make_study()
    lucky = make_trial(0, 3000, 300, max_num_seqs=256)
    steady = make_trial(1, 2500, 250, max_num_seqs=64)
    seen: list[tuple[str, int]] = []

    def confirm(trial, seed):
        seen.append((trial.trial_id, seed))
        return rerun(trial, seed, 1800 if trial.trial_id == "t000" else 2400)

    sel = select(study, [lucky, steady], confirm)
    assert sel.winner is not None and sel.winner.trial.trial_id == "t001"
    assert sel.winner.worst_objective == pytest.approx(2400)
    assert len(sel.winner.runs) == study.promotion.confirm_runs
    seeds = confirmation_seeds(study, study.promotion.confirm_runs)
    assert seen == [(t, s) for t in ("t000", "t001") for s in seeds]  # same seeds for every candidate
    assert study.seed not in seeds


def test_a_candidate_failing_a_confirmation_is_dropped() -> None:
    study = make_study()
    best = make_trial(0, 3000, 300)
    second = make_trial(1, 2000, 200)

    def confirm(trial, seed):
        if trial.trial_id == "t000":
            return rerun(trial, seed, 3100, ttft_p99=700)  # misses the SLA on another seed
        return rerun(trial, seed, 1900)

    sel = select(study, [best, second], confirm)
    assert sel.winner is not None and sel.winner.trial.trial_id == "t001"
    dropped = next(c for c in sel.candidates if c.trial.trial_id == "t000")
    assert "SLA violated" in dropped.dropped and "p99_ttft_ms" in dropped.dropped


def test_all_candidates_failing_confirmation_promotes_nothing() -> None:
    study = make_study()

    def confirm(trial, seed):
        if seed == confirmation_seeds(study, 2)[1]:
            return rerun(trial, seed, None, outcome=TrialOutcome.OOM)
        return rerun(trial, seed, 1000)

    sel = select(study, [make_trial(0, 3000, 300), make_trial(1, 2000, 200)], confirm)
    assert sel.winner is None
    assert "every candidate failed confirmation" in sel.reason and "oom" in sel.reason


def test_a_confirmation_that_raises_drops_the_candidate() -> None:
    study = make_study(promotion={"confirm_runs": 1, "top_k": 1})

    def confirm(trial, seed):
        raise RuntimeError("engine would not start")

    sel = select(study, [make_trial(0, 3000, 300)], confirm)
    assert sel.winner is None and "engine would not start" in sel.reason


def _confirm_with(figures: dict[str, list[float]], seen: list[tuple[str, int]]):
    """Confirmation runs returning, per trial id, the given objectives in seed order."""
    def confirm(trial, seed):
        seen.append((trial.trial_id, seed))
        return rerun(trial, seed, figures[trial.trial_id][sum(1 for t, _ in seen if t == trial.trial_id) - 1])
    return confirm


def test_defaults_win_when_the_tuned_config_is_worse_once_confirmed() -> None:
    """The reported case: a tuned trial that looked better once but is 0.87x the defaults when confirmed."""
    study = make_study()
    base = make_trial(0, 1000, 300, baseline=True)
    tuned = make_trial(1, 1100, 250, max_num_seqs=256)
    seen: list[tuple[str, int]] = []
    sel = select(study, [base, tuned], _confirm_with({"t000": [990, 1000], "t001": [870, 1090]}, seen))
    seeds = confirmation_seeds(study, study.promotion.confirm_runs)
    assert sorted(seen) == sorted((t, s) for t in ("t000", "t001") for s in seeds), "same seeds for the defaults"
    assert sel.defaults_won and sel.winner is not None and sel.winner.trial.baseline
    assert "defaults win" in sel.reason and "promoting the defaults" in sel.reason
    assert sel.gain == pytest.approx(1.0)

    nothing = select(make_study(promotion={"confirm_runs": 2, "top_k": 2, "when_defaults_win": "nothing"}),
                     [base, tuned], _confirm_with({"t000": [990, 1000], "t001": [870, 1090]}, []))
    assert nothing.defaults_won and nothing.winner is None and "nothing promoted" in nothing.reason


def test_a_win_inside_the_run_to_run_noise_is_no_win() -> None:
    study = make_study()
    base = make_trial(0, 1000, 300, baseline=True)
    tuned = make_trial(1, 1000, 250, max_num_seqs=256)
    # The defaults swing 10% between seeds; the tuned config's worst (980) beats their worst (900) by 8.9%.
    sel = select(study, [base, tuned], _confirm_with({"t000": [900, 1000], "t001": [980, 985]}, []))
    assert sel.noise == pytest.approx(0.1)
    assert sel.defaults_won and sel.winner is not None and sel.winner.trial.trial_id == "t000"
    assert "noise 10.0%" in sel.reason


def test_a_tuned_config_beating_the_confirmed_defaults_by_more_than_noise_wins() -> None:
    study = make_study()
    base = make_trial(0, 1000, 300, baseline=True)
    tuned = make_trial(1, 1500, 250, max_num_seqs=256)
    sel = select(study, [base, tuned], _confirm_with({"t000": [990, 1000], "t001": [1480, 1490]}, []))
    assert not sel.defaults_won and sel.winner is not None and sel.winner.trial.trial_id == "t001"
    assert sel.gain == pytest.approx(1480 / 990)
    assert "the defaults' confirmed 990" in sel.reason


def test_defaults_dominating_every_tuned_trial_say_so_not_a_failed_confirmation() -> None:
    """Seen on the sim (SLA on P99 TTFT only): the defaults beat both tuned trials on throughput and latency,
    so no tuned trial was a candidate; the reason said 'no tuned candidate survived confirmation'."""
    study = make_study()
    base = make_trial(0, 1300, 200, baseline=True)
    tuned = [make_trial(1, 1290, 250, max_num_seqs=128), make_trial(2, 1200, 300, max_num_seqs=256)]
    seen: list[tuple[str, int]] = []
    sel = select(study, [base, *tuned], _confirm_with({"t000": [1290, 1280]}, seen))
    assert sel.defaults_won and sel.winner is not None and sel.winner.trial.baseline
    assert "survived confirmation" not in sel.reason
    assert "the defaults dominate all 2 SLA-feasible tuned trial(s)" in sel.reason
    assert {t for t, _ in seen} == {"t000"}, "only the defaults were confirmed"


def test_a_baseline_only_study_says_no_tuned_trial_met_the_sla() -> None:
    study = make_study()
    sel = select(study, [make_trial(0, 1300, 200, baseline=True), make_trial(1, 2000, 900)],
                 _confirm_with({"t000": [1290, 1280]}, []))
    assert sel.defaults_won and "no tuned trial met the SLA" in sel.reason
    alone = select(study, [make_trial(0, 1300, 200, baseline=True)], _confirm_with({"t000": [1290, 1280]}, []))
    assert alone.defaults_won and "the study ran no tuned trial (the baseline only)" in alone.reason  # budget 1


def test_tuned_candidates_dropped_in_confirmation_are_named_with_the_cause() -> None:
    study = make_study()
    base = make_trial(0, 1000, 300, baseline=True)
    tuned = make_trial(1, 1500, 250, max_num_seqs=256)

    def confirm(trial, seed):
        return rerun(trial, seed, 990) if trial.baseline else rerun(trial, seed, None, outcome=TrialOutcome.OOM)

    sel = select(study, [base, tuned], confirm)
    assert sel.defaults_won
    assert "no tuned candidate survived confirmation (trial t001: confirmation with seed" in sel.reason
    assert "oom" in sel.reason


def test_nothing_feasible_names_the_closest_miss() -> None:
    study = make_study()
    near = make_trial(0, 900, 700, outcome=TrialOutcome.SLA_VIOLATED, baseline=True)
    far = make_trial(1, 900, 5000, outcome=TrialOutcome.SLA_VIOLATED)
    sel = select(study, [far, near], confirm=None)
    assert sel.winner is None
    assert "no trial met the SLA at any load (2 sla_violated)" in sel.reason
    assert "closest: trial t000 (engine defaults) at the lowest load, 0.5 req/s: p99_ttft_ms 700 > 500" in sel.reason
