"""The wired simulator gate (SearchCore + StudyGate) proposes the simulator's best configs, is rebuilt
from the recorded trials on resume, and widens its error when the engine meets an SLA the simulator said
it would miss. Real simulator runs throughout: a perturbed calibration plays the real engine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.search.helpers import make_study
from tuner.search.prescreen import simulate
from tuner.search.resume import open_storage
from tuner.search.searcher import SearchCore
from tuner.search.sim_gate import SimGate
from tuner.search.space import build_space
from tuner.search.study_gate import StudyGate
from tuner.sim.calibration import FITTED
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

QUICK = {"low": 1, "high": 16, "max_points": 4, "requests_per_point": 40}
MODEL = {"name": "Qwen/Qwen3-8B", "max_model_len": 8192}
SLOW = replace(FITTED, e_lin=FITTED.e_lin * 0.8, e_w=FITTED.e_w * 0.8, e_kv=FITTED.e_kv * 0.8)
FAST = replace(FITTED, e_lin=FITTED.e_lin * 1.3, e_w=FITTED.e_w * 1.3, e_kv=FITTED.e_kv * 1.3)


def _study(**search: Any) -> Study:
    return make_study(engine="vllm", model=MODEL, capacity=QUICK, sla=["p99_ttft_ms <= 1000"],
                      search={"algorithm": "tpe", "n_startup_trials": 4, "sim_gate": {"pool": 12, **search}})


def test_the_gate_proposes_the_simulators_best_config_first() -> None:
    study = _study()
    space = build_space(study)
    gate = StudyGate(study, space)
    core = SearchCore(study, space, gate=gate)
    base = core.ask()
    assert base is not None and base.baseline
    core.tell(base.number, simulate(study, "vllm", base.args, calibration=SLOW))
    first = core.ask()
    assert first is not None and not first.baseline
    assert any("proposed by the simulator" in n for n in first.notes), first.notes
    # it is the pooled config with the best prediction (the correction scales all alike) of those the simulator
    # can tell from the measured baseline: one predicted within twin_tol of it is its twin, and the baseline's
    # measurement stands for it (it cannot beat the incumbent the baseline set)
    pooled = [p for c in gate.pool() if (p := gate.predict(c["engine"], c["args"])[0]) is not None]
    chosen = gate.predict(first.engine, first.args)[0]
    assert chosen == max(p for p in pooled if gate.gate.twin(p) is None)
    assert all(gate.gate.twin(p) is not None for p in pooled if chosen is not None and p > chosen)
    assert any(r["event"] == "pool" for r in gate.records)


def _result(number: int, cfg: Any, rep: Any) -> TrialResult:
    return TrialResult(trial_id=f"t{number}", number=number, engine=cfg.engine, params=cfg.params, args=cfg.args,
                       outcome=rep.outcome, objective=rep.objective, capacity=rep.capacity, reason=rep.reason,
                       baseline=cfg.baseline, metrics=dict(rep.metrics))


def test_resume_rebuilds_the_gate_from_the_recorded_trials(tmp_path: Path) -> None:
    study = _study()
    space = build_space(study)
    gate = StudyGate(study, space)
    core = SearchCore(study, space, gate=gate, storage=open_storage(tmp_path, study.name, fresh=True))
    done: list[TrialResult] = []
    for _ in range(4):
        cfg = core.ask()
        if cfg is None:  # the gate ended the search: nothing left could win
            break
        rep = simulate(study, "vllm", cfg.args, calibration=SLOW)
        core.tell(cfg.number, rep)
        done.append(_result(cfg.number, cfg, rep))
    assert len(gate.gate.ratios) >= 2 and gate.gate.correction() < 1  # a slower "real" GPU

    fresh = StudyGate(study, space, tmp_path)
    again = SearchCore(study, space, gate=fresh, storage=open_storage(tmp_path, study.name, fresh=False))
    again.resume(done)
    # the same measured / predicted ratios (each recorded trial re-predicted), not the prior
    assert sorted(fresh.gate.ratios) == sorted(gate.gate.ratios)
    assert fresh.gate.error() == gate.gate.error() and fresh.gate.correction() == gate.gate.correction()
    resumed = [r for r in fresh.records if r["event"] == "measured"]
    assert [r["number"] for r in resumed] == [t.number for t in done] and all(r.get("resumed") for r in resumed)
    nxt = again.ask()  # the search goes on (or ends: nothing left could win); it never repeats a recorded config
    ran = {again._key(t.engine, t.args) for t in done}
    assert not fresh._proposed & ran
    assert nxt is None or (nxt.number == len(done) and again._key(nxt.engine, nxt.args) not in ran)


def test_a_surprise_widens_the_error_and_reopens_near_misses() -> None:
    gate = SimGate(prior_error=0.3, floor=0.05, min_points=2)
    for p, m in ((100.0, 80.0), (200.0, 160.0), (100.0, 82.0)):
        gate.observe(p, m)
    assert abs(gate.error() - 0.025 / 0.8 * 0.8 / 0.8) < 0.05 and gate.error() < 0.1
    assert not gate.could_beat(None, 50.0, miss=0.1)[0]  # no surprise yet: the simulator's "miss" is final
    gate.observe(None, 90.0, miss=0.4)  # the simulator said: SLA missed by 40 %; the engine met it
    assert gate.surprises == [0.4] and gate.error() == 0.4
    ok, why = gate.could_beat(None, 50.0, miss=0.3)
    assert ok and "within its measured error 40%" in why
    assert not gate.could_beat(None, 50.0, miss=0.5)[0]  # a miss beyond the error stays skipped
    _, upper = gate.bounds(100.0)
    assert upper is not None and abs(upper - 100 * 0.8 * 1.4) < 1e-6  # every upper bound widens too


def test_study_gate_records_the_surprise() -> None:
    """The baseline's simulated P99 TTFT at the lowest load sits just above the limit, while the faster
    "real" engine meets it: the measured line says so and the error grows to the predicted margin."""
    loose = _study()
    sim = simulate(loose, "vllm", {}).load_points[0].summary["p99_ttft_ms"]
    real = simulate(loose, "vllm", {}, calibration=FAST).load_points[0].summary["p99_ttft_ms"]
    assert real < sim
    limit = (real + sim) / 2
    study = make_study(engine="vllm", model=MODEL, capacity=QUICK, sla=[f"p99_ttft_ms <= {limit:.3f}"],
                       search={"sim_gate": {"pool": 0}})
    space = build_space(study)
    gate = StudyGate(study, space)
    core = SearchCore(study, space, gate=gate)
    base = core.ask()
    assert base is not None and base.baseline
    rep = simulate(study, "vllm", base.args, calibration=FAST)
    assert rep.outcome is TrialOutcome.OK, rep.reason
    assert any("cannot meet the SLA" in n for n in base.notes), base.notes
    core.tell(base.number, rep)
    line = next(r for r in gate.records if r["event"] == "measured")
    assert "surprise" in line and gate.gate.surprises
    margin = (sim - limit) / limit
    assert abs(gate.gate.surprises[0] - margin) < 0.02 and gate.gate.error() >= margin - 0.02
