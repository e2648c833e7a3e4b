"""The simulator gate of a real-engine study (`search.sim_gate`): GPU time only where the simulator is unsure.

SearchCore asks `judge` before launching a sampled config: the config is run on the calibrated
simulator (virtual time, the study's own workload, SLA and capacity search), and `SimGate` decides
whether its prediction, corrected by the real trials so far and widened by the simulator's measured
error, could beat the incumbent. Skipped configs are told to Optuna as failed with the reason (never
a made-up score); launched ones carry the prediction in their notes (trials.parquet, MLflow trial.json).
After each real trial `observe` updates the correction, so every later candidate is judged by it.
Every decision and measurement is a line of `sim_gate.jsonl` in the output folder.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.common.numeric import finite_float
from tuner.search.ask_tell import TrialReport
from tuner.search.prescreen import simulate
from tuner.search.sim_gate import SimGate
from tuner.search.space import Space
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome

log = logging.getLogger(__name__)
FILE = "sim_gate.jsonl"


class StudyGate:
    """Predictions, decisions and the running correction of one study."""

    def __init__(self, study: Study, space: Space, out: Path | None = None) -> None:
        s = study.search.sim_gate
        self.study, self.space, self.settings = study, space, s
        self.gate = SimGate(prior_error=s.prior_error, floor=s.floor, min_points=s.min_points)
        self.path = out / FILE if out is not None else None
        self.predicted: dict[int, tuple[float | None, float | None]] = {}  # trial number -> (objective, capacity)
        self.records: list[dict[str, Any]] = []
        self.skips_in_a_row = 0

    def predict(self, engine: str, args: dict[str, Any]) -> tuple[float | None, float | None, str]:
        """(objective, capacity, why none) of the config on the simulator; objective None: cannot meet the SLA."""
        r = simulate(self.study, self.space.engines[engine].flavour, args)
        if r.outcome is TrialOutcome.OK and r.objective is not None:
            return r.objective, r.capacity, ""
        return None, None, r.reason or r.outcome.value

    def judge(self, engine: str, args: dict[str, Any], incumbent: float | None,
              baseline: bool = False) -> tuple[bool, str, tuple[float | None, float | None]]:
        """(launch?, the reason in words, the prediction). The baseline is always launched."""
        obj, cap, why_none = self.predict(engine, args)
        corrected, upper = self.gate.bounds(obj)
        if baseline:
            ok, reason = True, "baseline: always launched"
        else:
            ok, reason = self.gate.could_beat(obj, incumbent)
            if obj is None and why_none:
                reason = f"simulator: {why_none[:200]}"
        self.skips_in_a_row = 0 if ok else self.skips_in_a_row + 1
        self._write({"event": "launched" if ok else "skipped", "engine": engine, "args": args,
                     "predicted_objective": obj, "predicted_capacity": cap, "corrected": corrected, "upper": upper,
                     "incumbent": incumbent, "error": self.gate.error(), "correction": self.gate.correction(),
                     "reason": reason})
        return ok, reason, (obj, cap)

    def note(self, number: int, launched_reason: str, prediction: tuple[float | None, float | None]) -> str:
        """The launched trial's note, and remember its prediction for `observe`."""
        self.predicted[number] = prediction
        self.records[-1]["number"] = number
        obj, cap = prediction
        unit = "req/s" if self.study.capacity.mode == "rate" else "concurrent"
        said = (f"predicted capacity {cap:.3g} {unit}, objective {obj:.4g}" if obj is not None
                and cap is not None else "predicted: cannot meet the SLA")
        return f"sim_gate: {said}; launched: {launched_reason}"

    def observe(self, number: int, report: TrialReport) -> None:
        """A real trial finished: its measured objective updates the correction."""
        if number not in self.predicted:
            return
        obj, cap = self.predicted.pop(number)
        measured = finite_float(report.objective) if report.outcome is TrialOutcome.OK else None
        self.gate.observe(obj, measured)
        self._write({"event": "measured", "number": number, "predicted_objective": obj, "predicted_capacity": cap,
                     "measured_objective": measured, "measured_capacity": finite_float(report.capacity),
                     "outcome": report.outcome.value, "correction": self.gate.correction(),
                     "error": self.gate.error()})

    def _write(self, row: dict[str, Any]) -> None:
        self.records.append(row)
        if self.path is None:
            return
        try:
            with self.path.open("a") as f:
                f.write(json.dumps(row, default=str) + "\n")
        except OSError as exc:  # the record is kept in memory; a full disk is reported by the trial writer
            log.warning("sim_gate.jsonl not written: %s", exc)


def gate_for(study: Study, space: Space, out: Path | None) -> StudyGate | None:
    """The study's gate, or None: off by setting, on the simulated engine by default, or when the
    simulator cannot model the study's engine or model (an error when the study asked for the gate
    explicitly)."""
    from tuner.engines import engine_class

    enabled = study.search.sim_gate.enabled
    real = any(not engine_class(e).simulated for e in study.engine_names)
    if enabled is False or (enabled is None and not real):
        return None
    from tuner.sim.knobs import FLAVOURS

    # the simulator imitates vLLM and SGLang; another engine (a plug-in) has no model to gate with
    unknown = sorted({space.engines[e].flavour for e in study.engine_names} - set(FLAVOURS))
    if unknown:
        if enabled:
            raise SpecError(f"search.sim_gate: the simulator imitates {list(FLAVOURS)}, not {unknown}",
                            "search.sim_gate.enabled", "set search.sim_gate.enabled: false for this engine")
        log.info("sim gate off: the simulator does not imitate %s", ", ".join(unknown))
        return None
    try:
        from tuner.sim import shape_for

        if study.model.shape is None:
            shape_for(study.model.name)
    except SpecError as exc:
        if enabled:
            raise SpecError(f"search.sim_gate needs a model the simulator knows: {exc.what}", "search.sim_gate.enabled",
                            "set model.shape to a known shape, or sim_gate.enabled: false") from None
        log.info("sim gate off: the simulator does not know model %s", study.model.name)
        return None
    return StudyGate(study, space, out)
