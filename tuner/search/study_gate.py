"""The simulator gate of a real-engine study (`search.sim_gate`): GPU time only where the simulator is unsure.

The gate both proposes and vetoes. It proposes: once, before the first searched trial, it runs the
study's own search on the calibrated simulator for `sim_gate.pool` trials (virtual time, the study's
workload, SLA and capacity search; about a second each); before every real trial SearchCore asks it for
the pooled config with the best upper bound (prediction corrected by the real trials so far, widened by
the simulator's measured error) that could beat the incumbent and has not run (nor has a simulator twin
that ran), and launches that. Only when none is left does the study's sampler propose, and the gate vetoes
each of its samples the same way (`judge`). Skipped configs are told to Optuna as failed with the reason
(never a made-up score); launched ones carry the prediction and why in their notes (trials.parquet,
MLflow trial.json). After each real trial `observe` updates the correction and the error, so every later
candidate, pooled or sampled, is re-scored with them. A resumed study rebuilds the gate from its recorded
trials (each re-predicted on the simulator). Every decision and measurement is a line of `sim_gate.jsonl`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.common.numeric import finite_float
from tuner.search.ask_tell import TrialReport
from tuner.search.feasibility import config_key
from tuner.search.prescreen import simulate
from tuner.search.sim_gate import SimGate
from tuner.search.space import Space
from tuner.sim.calibration import FITTED
from tuner.sim.host import host_calibration
from tuner.spec.levers import labels
from tuner.spec.sla import max_violation
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome

log = logging.getLogger(__name__)
FILE = "sim_gate.jsonl"
HOST_TRIES = 3  # measured trials tried for the host fit before the gate keeps the calibration as shipped
HOST_MIN_REQUESTS = 50  # a trial's records with fewer do not pin the factors
POOL_GROWTH = 3  # the simulated search may run up to this many times sim_gate.pool trials
Prediction = tuple[float | None, float | None, float | None]  # objective, capacity, predicted SLA miss


class StudyGate:
    """Predictions, proposals, decisions and the running correction of one study."""

    def __init__(self, study: Study, space: Space, out: Path | None = None) -> None:
        s = study.search.sim_gate
        self.study, self.space, self.settings = study, space, s
        self.gate = SimGate(prior_error=s.prior_error, floor=s.floor, min_points=s.min_points)
        self.path = out / FILE if out is not None else None
        self.predicted: dict[int, Prediction] = {}  # trial number -> prediction, until measured
        self.records: list[dict[str, Any]] = []
        self.skips_in_a_row = 0
        self._cache: dict[tuple[str, str], tuple[Prediction, str]] = {}
        self._pool: list[dict[str, Any]] | None = None  # the simulated search's configs, built on first use
        self._sim: Any = None  # the simulated search (tuner.search.prescreen.SimulatedSearch), continued on demand
        self._proposed: set[tuple[str, str]] = set()
        # the simulator's calibration: the study's host factors, else fitted on the first measured trial (fit_host)
        self.calibration: Any = host_calibration(study.sim.host_factors)
        self._host_tries = 0 if s.fit_host and study.sim.host_factors is None else HOST_TRIES

    def _key(self, engine: str, args: dict[str, Any]) -> tuple[str, str]:
        return config_key(engine, {**self.space.engines[engine].defaults(), **args})

    def predict(self, engine: str, args: dict[str, Any]) -> tuple[float | None, float | None, str]:
        """(objective, capacity, why none) of the config on the simulator; objective None: cannot meet the SLA."""
        (obj, cap, _), why = self._predict(engine, args)
        return obj, cap, why

    def _predict(self, engine: str, args: dict[str, Any]) -> tuple[Prediction, str]:
        key = self._key(engine, args)
        if key not in self._cache:
            self._cache[key] = self._read(simulate(self.study, self.space.engines[engine].flavour, args,
                                                   calibration=self.calibration))
        return self._cache[key]

    def _read(self, r: TrialReport) -> tuple[Prediction, str]:
        if r.outcome is TrialOutcome.OK and r.objective is not None:
            return (r.objective, r.capacity, None), ""
        miss = max_violation(self.study.sla, r.metrics) if r.outcome is TrialOutcome.SLA_VIOLATED and r.metrics else None
        return (None, None, finite_float(miss)), r.reason or r.outcome.value

    # ------------------------------------------------------------ proposing

    def pool(self) -> list[dict[str, Any]]:
        """The study's search run on the simulator for `sim_gate.pool` trials: engine, params, args, key."""
        if self._pool is None:
            from tuner.search.prescreen import SimulatedSearch

            self._pool, self._sim = [], SimulatedSearch(self.study, self.space)
            self._sim.calibration = self.calibration
            self._grow()
        return self._pool

    def _grow(self) -> int:
        """Run the simulated search `sim_gate.pool` trials further (up to POOL_GROWTH times the pool in
        all): simulator time is cheap next to ending a study that a wider pool could still improve."""
        sim = self._sim
        if self._pool is None or sim is None or sim.ended or sim.trials >= POOL_GROWTH * self.settings.pool:
            return 0
        added = 0
        for h, report in sim.run(self.settings.pool):
            key = self._key(h["engine"], h["args"])
            self._cache.setdefault(key, self._read(report))
            if not h["baseline"] and all(c["key"] != key for c in self._pool):
                self._pool.append({"engine": h["engine"], "params": dict(h["params"]), "args": dict(h["args"]),
                                   "key": key})
                added += 1
        self._write({"event": "pool", "simulated": sim.trials, "candidates": len(self._pool)})
        return added

    def propose(self, incumbent: float | None, ran: Callable[[tuple[str, str]], bool]
                ) -> tuple[str, dict[str, Any]] | None:
        """The pooled (engine, params) with the best upper bound now, if it could beat the incumbent and
        neither it (`ran(key)`) nor a simulator twin of it ran; when none can, the simulated search goes
        on (`_grow`) before giving up; None: the sampler proposes from here."""
        if self.settings.pool == 0:
            return None
        self.pool()
        while True:
            best: tuple[float, dict[str, Any]] | None = None
            for c in self._pool or []:
                if c["key"] in self._proposed or ran(c["key"]):
                    continue
                (obj, _, miss), _ = self._cache[c["key"]]
                _, upper, ok, _ = self.gate.score(obj, incumbent, miss)
                if ok and (best is None or (upper or 0.0) > best[0]):
                    best = (upper or 0.0, c)
            if best is not None:
                self._proposed.add(best[1]["key"])
                return best[1]["engine"], best[1]["params"]
            if not self._grow():
                return None

    # ------------------------------------------------------------ judging

    def judge(self, engine: str, args: dict[str, Any], incumbent: float | None,
              baseline: bool = False) -> tuple[bool, str, Prediction]:
        """(launch?, the reason in words, the prediction). The baseline is always launched."""
        (obj, cap, miss), why_none = self._predict(engine, args)
        prediction = (obj, cap, miss)
        if baseline:
            corrected, upper = self.gate.bounds(obj)
            ok, reason = True, "baseline: always launched"
        else:
            corrected, upper, ok, reason = self.gate.score(obj, incumbent, miss)
            if not ok and obj is None and why_none:
                reason = f"simulator: {why_none[:200]}"
            elif ok and self._key(engine, args) in self._proposed:
                reason = f"proposed by the simulator (best upper bound of {len(self.pool())} simulated configs): {reason}"
        self.skips_in_a_row = 0 if ok else self.skips_in_a_row + 1
        self._write({"event": "launched" if ok else "skipped", "engine": engine, "args": args,
                     "predicted_objective": obj, "predicted_capacity": cap, "predicted_miss": miss,
                     "corrected": corrected, "upper": upper, "incumbent": incumbent, "error": self.gate.error(),
                     "correction": self.gate.correction(), "reason": reason})
        return ok, reason, prediction

    def note(self, number: int, launched_reason: str, prediction: Prediction) -> str:
        """The launched trial's note, and remember its prediction for `observe`."""
        self.predicted[number] = prediction
        self.records[-1]["number"] = number
        obj, cap, _ = prediction
        unit = "req/s" if self.study.capacity.mode == "rate" else "concurrent"
        said = (f"predicted capacity {cap:.3g} {unit}, objective {obj:.4g}" if obj is not None
                and cap is not None else "predicted: cannot meet the SLA")
        return f"sim_gate: {said}; launched: {launched_reason}"

    def observe(self, number: int, report: TrialReport, engine: str | None = None,
                args: dict[str, Any] | None = None) -> None:
        """A real trial finished: its measured objective updates the correction and the error. A trial the
        gate did not launch (one recorded before a `--resume`) is predicted now from its `engine`/`args`."""
        resumed = number not in self.predicted
        if resumed:
            if engine is None or args is None:
                return
            self.predicted[number] = self._predict(engine, args)[0]
        if self._host_tries < HOST_TRIES and report.outcome is TrialOutcome.OK and report.records_path and engine:
            if self._fit_host(number, engine, args or {}, Path(report.records_path)):
                self.predicted[number] = self._predict(engine, args or {})[0]  # on the host it was measured on
        obj, cap, miss = self.predicted.pop(number)
        measured = finite_float(report.objective) if report.outcome is TrialOutcome.OK else None
        surprises = len(self.gate.surprises)
        self.gate.observe(obj, measured, order=number, miss=miss)
        row = {"event": "measured", "number": number, "predicted_objective": obj, "predicted_capacity": cap,
               "measured_objective": measured, "measured_capacity": finite_float(report.capacity),
               "outcome": report.outcome.value, "correction": self.gate.correction(), "error": self.gate.error()}
        if resumed:
            row["resumed"] = True
        if len(self.gate.surprises) > surprises:
            row["surprise"] = (f"the engine met the SLA the simulator said it would miss by {miss or 0:.0%}: "
                               f"error now {self.gate.error():.0%}")
        self._write(row)

    def _fit_host(self, number: int, engine: str, args: dict[str, Any], records: Path) -> bool:
        """Fit the host factors on a measured trial's per-request records (tuner.sim.host) and predict with them
        from now on; False (and a line in sim_gate.jsonl saying why) where the records cannot pin them."""
        from tuner.sim.host import apply_host, fit_host_run, load_run

        row: dict[str, Any] = {"event": "host", "number": number}
        flavour = self.space.engines[engine].flavour
        if flavour != "vllm":
            self._host_tries = HOST_TRIES
            self._write({**row, "skipped": f"the host probe models vLLM's launch, not {flavour}'s"})
            return False
        if "speculative_decoding" in labels(args):  # not a try: the next trial without it probes the host
            self._write({**row, "skipped": "the trial runs speculative decoding: its step times carry the text's "
                                           "acceptance and the verify step's cost (uncalibrated, docs/sim.md), "
                                           "not the host's; a trial without it probes the host"})
            return False
        self._host_tries += 1
        try:
            from tuner.sim import shape_for

            run = load_run(None, records)
            if len(run) < HOST_MIN_REQUESTS:  # before the fit: its grid is ~500 simulations
                self._write({**row, "skipped": f"only {len(run)} measured requests (the fit wants "
                                               f"{HOST_MIN_REQUESTS}+)"})
                return False
            shape = self.study.model.shape or shape_for(self.study.model.name)
            fit = fit_host_run(run, shape, self.study.sim.gpu, args, self.study.model.max_model_len)  # as simulate()
        except (ValueError, SpecError) as exc:  # load_run: a missing or unreadable file is a ValueError
            self._write({**row, "skipped": f"{records.name}: {exc}"[:300]})
            return False
        if not fit.trusted:
            self._write({**row, "skipped": f"at its best (launch x{fit.launch:g}, step x{fit.step:g}) the simulator's "
                         f"ITL percentiles are still {fit.off:.0%} off on average: the two factors do not model this "
                         "engine",
                         "launch": fit.launch, "step": fit.step, "loss": fit.loss})
            return False
        self._host_tries = HOST_TRIES
        self.calibration = apply_host(FITTED, fit.launch, fit.step)
        self._cache.clear()  # every prediction again, on this host
        if self._sim is not None:
            self._sim.calibration = self.calibration
        self._write({**row, "launch": fit.launch, "step": fit.step, "loss": fit.loss,
                     "loss_calibrated": fit.loss_calibrated, "requests": fit.requests})
        log.info("sim gate: host factors launch x%.2f step x%.2f from trial %d's records (ITL loss %.3f, "
                 "as calibrated %.3f)", fit.launch, fit.step, number, fit.loss, fit.loss_calibrated)
        return True

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
