"""Simulator in the loop (tuner.search.sim_gate) on real simulator runs: a perturbed calibration plays
the real engine, the fitted one the simulator."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.search.helpers import make_study
from tuner.search.prescreen import simulate
from tuner.search.sim_gate import Candidate, SimGate, gated_search, real_trials_to
from tuner.sim.calibration import FITTED
from tuner.trial.outcome import TrialOutcome

QUICK = {"low": 1, "high": 16, "max_points": 4, "requests_per_point": 40}
MODEL = {"name": "Qwen/Qwen3-8B", "max_model_len": 8192}
CONFIGS: list[dict[str, Any]] = [
    {}, {"max_num_seqs": 16}, {"max_num_seqs": 64, "max_num_batched_tokens": 2048},
    {"max_num_seqs": 256, "max_num_batched_tokens": 4096}, {"gpu_memory_utilization": 0.1},
]
SLOW = replace(FITTED, e_lin=FITTED.e_lin * 0.8, e_w=FITTED.e_w * 0.8, e_kv=FITTED.e_kv * 0.8)


def _obj(r: Any) -> float | None:
    return r.objective if r.outcome is TrialOutcome.OK else None


def test_gate_learns_the_correction_and_skips_what_cannot_win() -> None:
    study = make_study(engine="sim", model=MODEL, capacity=QUICK, sla=["p99_ttft_ms <= 1000"])
    sim = [simulate(study, "vllm", c) for c in CONFIGS]
    real = [simulate(study, "vllm", c, calibration=SLOW) for c in CONFIGS]
    assert real[0].objective is not None and sim[0].objective is not None
    assert real[0].objective < sim[0].objective  # a 20 % slower GPU serves less under the same SLA
    cands = [Candidate(i, _obj(r), r.capacity, why_none=r.reason) for i, r in enumerate(sim)]
    measured: list[int] = []

    def measure(i: int) -> tuple[float | None, float | None]:
        measured.append(i)
        return _obj(real[i]), real[i].capacity

    gate = SimGate()
    records = gated_search(cands, measure, gate=gate, first=0)
    assert len(records) == len(CONFIGS) and {r.key for r in records} == set(range(len(CONFIGS)))
    assert records[0].key == 0 and records[0].launched and records[0].order == 1
    launched = [r for r in records if r.launched]
    assert [r.key for r in launched] == measured  # exactly the launched ones cost a real trial
    # the config that cannot start on the simulator is never launched, and says why
    oom = next(r for r in records if r.key == 4)
    assert not oom.launched and oom.predicted is None and "simulator" in oom.reason
    # the correction is the median measured/predicted ratio of the launched trials: below 1 (slower GPU)
    ratios = sorted(_obj(real[r.key]) / _obj(sim[r.key]) for r in launched if _obj(real[r.key]) and _obj(sim[r.key]))
    assert gate.ratios and sorted(gate.ratios) == ratios and gate.correction() < 1
    # every skip is justified at the time it was made: upper bound not above the incumbent
    for r in records:
        if not r.launched and r.upper is not None:
            assert r.incumbent is not None and r.upper <= r.incumbent, r
    # the best measured among launched configs reaches the true best of the feasible ones (error bound held)
    truth = max(o for o in (_obj(r) for r in real) if o is not None)
    assert real_trials_to(records, 0.95 * truth) is not None


def test_error_widens_until_enough_points_and_never_below_floor() -> None:
    gate = SimGate(prior_error=0.3, floor=0.05, min_points=3)
    gate.observe(100.0, 80.0)
    gate.observe(200.0, 160.0)
    assert gate.error() == 0.3 and abs(gate.correction() - 0.8) < 1e-9
    gate.observe(100.0, 88.0)  # ratios 0.8, 0.8, 0.88: median 0.8, worst miss 10 %
    assert abs(gate.error() - 0.1) < 1e-9
    gate.observe(50.0, None)  # a real trial that missed the SLA teaches no ratio
    assert len(gate.ratios) == 3
    ok, why = gate.could_beat(100.0, incumbent=89.0)  # 100 * 0.8 * 1.1 = 88 <= 89
    assert not ok and "<=" in why
    assert gate.could_beat(100.0, incumbent=87.0)[0]


def test_plateau_twins_are_not_rerun() -> None:
    """Five candidates the simulator cannot tell apart: one real trial settles them all."""
    cands = [Candidate(0, 100.0)] + [Candidate(i, 200.0 + i * 0.1) for i in range(1, 6)] + [Candidate(9, 150.0)]
    runs: list[int] = []

    def measure(k: int) -> tuple[float | None, float | None]:
        runs.append(k)
        return {0: 80.0, 9: 121.0}.get(k, 160.0), None

    records = gated_search(cands, measure, first=0)
    assert runs[:2] == [0, 5]  # baseline, then the best upper bound
    assert runs.count(1) + runs.count(2) + runs.count(3) + runs.count(4) == 0
    twins = [r for r in records if r.key in (1, 2, 3, 4)]
    assert all(not r.launched and "twin of real trial #2" in r.reason for r in twins)


def test_search_core_with_the_study_gate_skips_and_ends() -> None:
    """SearchCore + StudyGate (what `python -m tuner.run` wires for a real engine): the baseline is
    launched with its prediction noted; candidates whose corrected upper bound cannot beat the measured
    incumbent are told to Optuna as failed with the reason; after `max_skips` in a row ask() ends."""
    from tuner.search.searcher import SearchCore
    from tuner.search.space import build_space
    from tuner.search.study_gate import StudyGate, gate_for

    study = make_study(engine="vllm", model=MODEL, capacity=QUICK, sla=["p99_ttft_ms <= 1000"],
                       search={"algorithm": "tpe", "n_startup_trials": 4,
                               "sim_gate": {"prior_error": 0.05, "max_skips": 3}})
    space = build_space(study)
    assert isinstance(gate_for(study, space, None), StudyGate)  # a real engine: on by default
    gate = StudyGate(study, space)
    core = SearchCore(study, space, gate=gate)
    launched = 0
    while (cfg := core.ask()) is not None and launched < 12:
        launched += 1
        assert any(n.startswith("sim_gate: predicted") for n in cfg.notes), cfg.notes
        # the "real engine" serves 2x what the simulator predicts (a GPU the simulator underrates)
        r = simulate(study, "vllm", cfg.args)
        core.tell(cfg.number, replace(r, objective=r.objective * 2 if r.objective else None))
    skipped = [r for r in gate.records if r["event"] == "skipped"]
    assert skipped and launched < 12, (launched, gate.records)
    assert gate.skips_in_a_row >= 3  # the search ended on the skip limit, not on the loop guard
    assert abs(gate.gate.correction() - 2.0) < 0.01  # measured / predicted, learned from the real trials
    assert all(r["upper"] is None or r["upper"] <= r["incumbent"] for r in skipped)
    assert any(r["reason"].startswith("sim_gate:") for r in core.rejected)


def test_gate_is_off_for_the_simulated_engine_by_default() -> None:
    from tuner.search.space import build_space
    from tuner.search.study_gate import gate_for

    study = make_study(engine="sim", model=MODEL, capacity=QUICK)
    assert gate_for(study, build_space(study), None) is None
    on = make_study(engine="sim", model=MODEL, capacity=QUICK, search={"sim_gate": {"enabled": True}})
    assert gate_for(on, build_space(on), None) is not None
