"""The simulator gate fits the host factors (tuner.sim.host) on the first measured trial's per-request records, then
predicts every config on that host; a study that gives its factors, or turns the fit off, keeps them; records that
cannot pin the factors leave the calibration as it was and say why in sim_gate.jsonl. Real simulator runs and real
Parquet files: a run simulated on a host at launch x0.5, step x1.1 plays the measured baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.search.helpers import make_study
from tests.sim.simhelp import poisson
from tuner.load.records_io import RecordWriter
from tuner.search.ask_tell import TrialReport
from tuner.search.space import build_space
from tuner.search.study_gate import StudyGate
from tuner.sim import SimulatedEngine
from tuner.sim.calibration import FITTED
from tuner.sim.host import apply_host
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome

MODEL = {"name": "Qwen/Qwen3-1.7B", "max_model_len": 8192}


def _study(sim: dict[str, Any] | None = None, **gate: Any) -> Study:
    return make_study(engine="vllm", model=MODEL, sla=["p99_itl_ms <= 60"], sim={"gpu": "H100", **(sim or {})},
                      capacity={"low": 1, "high": 16, "max_points": 3, "requests_per_point": 40},
                      search={"algorithm": "tpe", "n_startup_trials": 4, "sim_gate": {"pool": 0, **gate}})


def _measured(path: Path, launch: float = 0.5, step: float = 1.1, n: int = 120) -> Path:
    eng = SimulatedEngine(flavour="vllm", gpu="H100", shape="qwen3-1.7b", args={}, max_model_len=8192,
                          calibration=apply_host(FITTED, launch, step))
    with RecordWriter(path) as w:
        for r in eng.run(poisson(n, 6.0, 1024, 128, seed=3)):
            w.write(r)
    return path


def _measure(gate: StudyGate, records: Path, number: int = 0) -> None:
    ok, reason, prediction = gate.judge("vllm", {}, None, baseline=True)
    gate.note(number, reason, prediction)
    gate.observe(number, TrialReport(TrialOutcome.OK, objective=1000.0, capacity=4.0, records_path=str(records)),
                 "vllm", {})


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "sim_gate.jsonl").read_text().splitlines()]


def _fits(out: Path) -> list[dict[str, Any]]:
    return [r for r in _rows(out) if r["event"] == "host" and "skipped" not in r]


def test_the_gate_fits_the_host_on_the_first_measured_trial(tmp_path: Path) -> None:
    gate = StudyGate(_study(), build_space(_study()), out=tmp_path)
    before = gate.predict("vllm", {"max_num_seqs": 64})
    _measure(gate, _measured(tmp_path / "requests.parquet"))
    host = _fits(tmp_path)
    assert len(host) == 1 and (host[0]["launch"], host[0]["step"]) == (0.5, 1.1), host
    assert host[0]["loss"] < host[0]["loss_calibrated"] and host[0]["requests"] == 120
    assert gate.calibration.prompt_cpu_step_s == pytest.approx(FITTED.prompt_cpu_step_s * 0.5)
    assert gate.predict("vllm", {"max_num_seqs": 64}) != before  # predicted again, on the fitted host
    _measure(gate, _measured(tmp_path / "second.parquet", 1.0, 1.0), number=1)
    assert len(_fits(tmp_path)) == 1 and len([r for r in _rows(tmp_path) if r["event"] == "host"]) == 1  # once


@pytest.mark.parametrize(("sim", "gate_settings"), [({"host_factors": {"launch": 0.8, "step": 1.0}}, {}),
                                                    ({}, {"fit_host": False})])
def test_given_factors_or_fit_host_off_keep_the_calibration(tmp_path: Path, sim: dict[str, Any],
                                                            gate_settings: dict[str, Any]) -> None:
    study = _study(sim, **gate_settings)
    gate = StudyGate(study, build_space(study), out=tmp_path)
    kept = gate.calibration
    _measure(gate, _measured(tmp_path / "requests.parquet"))
    assert gate.calibration is kept and not [r for r in _rows(tmp_path) if r["event"] == "host"]


def test_records_that_cannot_pin_the_factors_are_skipped_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "requests.parquet"
    bad.write_text("not parquet")
    gate = StudyGate(_study(), build_space(_study()), out=tmp_path)
    _measure(gate, bad)
    host = [r for r in _rows(tmp_path) if r["event"] == "host"]
    assert gate.calibration is None and len(host) == 1 and "requests.parquet" in host[0]["skipped"]
    _measure(gate, _measured(tmp_path / "good.parquet"), number=1)  # the next measured trial is tried
    assert [r["launch"] for r in _fits(tmp_path)] == [0.5]


@pytest.mark.parametrize("args", [{"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}},
                                  {"speculative_config": {"method": "ngram_gpu", "num_speculative_tokens": 5}}])
def test_a_speculative_trial_does_not_probe_the_host(tmp_path: Path, args: dict[str, Any]) -> None:
    """Real n-gram runs read the verify step ~25 % longer than the simulator prices it (docs/sim.md): a host fit on such
    a trial would carry that into every prediction. It is skipped, without using up a try: HOST_TRIES speculative
    trials in a row still leave the next plain one to probe the host."""
    gate = StudyGate(_study(), build_space(_study()), out=tmp_path)
    for number in range(4):
        _, reason, prediction = gate.judge("vllm", args, None, baseline=True)
        gate.note(number, reason, prediction)
        gate.observe(number, TrialReport(TrialOutcome.OK, objective=900.0, capacity=3.0,
                                         records_path=str(_measured(tmp_path / f"spec{number}.parquet"))), "vllm", args)
    host = [r for r in _rows(tmp_path) if r["event"] == "host"]
    assert gate.calibration is None and len(host) == 4 and all("speculative decoding" in r["skipped"] for r in host)
    _measure(gate, _measured(tmp_path / "plain.parquet"), number=4)
    assert [(r["number"], r["launch"]) for r in _fits(tmp_path)] == [(4, 0.5)]


@pytest.mark.parametrize(("step", "n", "says"), [(3.0, 120, "the two factors do not model this engine"),
                                                 (1.1, 30, "only 30 measured requests")])
def test_a_fit_the_factors_cannot_trust_is_skipped(tmp_path: Path, step: float, n: int, says: str) -> None:
    gate = StudyGate(_study(), build_space(_study()), out=tmp_path)
    _measure(gate, _measured(tmp_path / "requests.parquet", 0.5, step, n))
    host = [r for r in _rows(tmp_path) if r["event"] == "host"]
    assert gate.calibration is None and len(host) == 1 and says in host[0]["skipped"], host


def test_the_records_path_reaches_the_gate_through_tune_and_on_resume(tmp_path: Path) -> None:
    from tuner.trial.result import TrialResult

    records = _measured(tmp_path / "requests.parquet")
    study = _study()
    result = TrialResult(trial_id="t0", number=0, engine="vllm", params={}, args={}, outcome=TrialOutcome.OK,
                         objective=1000.0, capacity=4.0, baseline=True, records_path=str(records))
    report = TrialReport.from_tune(TrialReport.of(study, result).to_tune())  # what the Ray executor hands back
    assert report.records_path == str(records)
    gate = StudyGate(study, build_space(study), out=tmp_path)
    gate.observe(0, TrialReport.of(study, result), "vllm", {})  # a recorded trial, rebuilt on --resume
    assert [(r["launch"], r["step"]) for r in _fits(tmp_path)] == [(0.5, 1.1)]
