"""Simulator in the loop without a GPU: real (GPU) trials to reach 95 % of the optimum, with and without it.

A deliberately miscalibrated simulator plays the "real engine": the fitted calibration with known
perturbations of its cost terms (PERTURB, 10-30 %), and the unperturbed one plays the simulator. Study:
the seeds' static test (studies/static-levers.yaml, FP8 opt-in), load points shortened to `--duration-s`.

- without the loop: the study's own search (constrained TPE, baseline first, SearchCore by ask/tell)
  runs `--budget` trials directly on the "real engine";
- with the loop: the same search runs `--pool` trials on the simulator (no GPU); those configs are the
  candidates, each with its predicted objective; `tuner.search.sim_gate.gated_search` launches real
  trials (baseline first, then best upper bound) only while a candidate's corrected prediction widened
  by the measured error could beat the incumbent, re-scoring after each real trial.

The true optimum is the best "real" objective over a random reference sample (`--ref-sample`) and every
config either arm launched. A run that never reaches 95 % counts as budget + 1 in the medians.
Prints per seed the real trials to 95 % in each arm, the per-trial log of seed 0 (predicted vs measured,
launch/skip reason), and last `real_trials_to_95pct_with_loop=A without_loop=B` (medians over seeds).

    .venv/bin/python benchmarks/sim_in_loop.py [--seeds 5] [--budget 30] [--pool 40] [--log runs/sim_in_loop.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import optuna

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.search.ask_tell import TrialReport  # noqa: E402
from tuner.search.feasibility import config_key  # noqa: E402
from tuner.search.prescreen import simulate  # noqa: E402
from tuner.search.searcher import SearchCore  # noqa: E402
from tuner.search.sim_gate import Candidate, gated_search, real_trials_to  # noqa: E402
from tuner.search.space import build_space  # noqa: E402
from tuner.search.study_gate import StudyGate  # noqa: E402
from tuner.sim.calibration import FITTED  # noqa: E402
from tuner.spec.load import load_yaml, validate  # noqa: E402
from tuner.spec.study import Study  # noqa: E402
from tuner.trial.outcome import TrialOutcome  # noqa: E402

# the "real engine": known miscalibration of the cost terms (factor on the fitted value)
PERTURB = {"e_lin": 0.85, "e_w": 1.2, "e_kv": 0.8, "o_step_s": 1.25, "fp8_lin_gain": 0.85, "fp8_kv_gain": 1.15}


class Scorer:
    """Scores configs on one calibration once each (cache by config with defaults)."""

    def __init__(self, study: Study, space: Any, calibration: Any) -> None:
        self.study, self.space, self.cal = study, space, calibration
        self.cache: dict[tuple[str, str], TrialReport] = {}

    def key(self, engine: str, args: dict[str, Any]) -> tuple[str, str]:
        return config_key(engine, {**self.space.engines[engine].defaults(), **args})

    def score(self, engine: str, args: dict[str, Any]) -> TrialReport:
        k = self.key(engine, args)
        if k not in self.cache:
            self.cache[k] = simulate(self.study, self.space.engines[engine].flavour, args, calibration=self.cal)
        return self.cache[k]

    def best(self) -> float:
        return max((r.objective for r in self.cache.values() if _ok(r)), default=float("nan"))


def _ok(r: TrialReport) -> bool:
    return r.outcome is TrialOutcome.OK and r.objective is not None


def search(scorer: Scorer, study: Study, trials: int, seed: int,
           sampler: optuna.samplers.BaseSampler | None = None) -> list[tuple[str, dict[str, Any], TrialReport]]:
    """The study's search on `scorer` for `trials` launched configs (2 at a time, as the study says)."""
    core = SearchCore(study.model_copy(update={"seed": seed}), scorer.space, sampler=sampler)
    out: list[tuple[str, dict[str, Any], TrialReport]] = []
    while len(out) < trials:
        batch = [c for c in (core.ask() for _ in range(min(study.budget.max_concurrent, trials - len(out))))
                 if c is not None]
        if not batch:
            break
        for cfg in batch:
            res = scorer.score(cfg.engine, cfg.args)
            core.tell(cfg.number, res)
            out.append((cfg.engine, cfg.args, res))
    return out


def wired(real: Scorer, study: Study, budget: int, seed: int, pool: int
          ) -> tuple[list[float | None], int, list[dict[str, Any]]]:
    """The gate as `python -m tuner.run` runs it (SearchCore + StudyGate, the unperturbed simulator
    predicting and proposing from a `pool`-trial simulated search): the measured objective of each real
    trial in launch order, the candidates skipped, and the gate's records."""
    gate_settings = study.search.sim_gate.model_copy(update={"pool": pool})
    study = study.model_copy(update={"seed": seed, "search": study.search.model_copy(update={"sim_gate": gate_settings})})
    gate = StudyGate(study, real.space)
    core = SearchCore(study, real.space, gate=gate)
    measured: list[float | None] = []
    while len(measured) < budget:
        batch = core.ask_batch(min(study.budget.max_concurrent, budget - len(measured)))
        if not batch:
            break  # the gate ruled out every recent candidate: the search ends here
        for cfg in batch:
            res = real.score(cfg.engine, cfg.args)
            core.tell(cfg.number, res)
            measured.append(res.objective if _ok(res) else None)
    return measured, sum(r["event"] == "skipped" for r in gate.records), gate.records


def trial_log(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per real trial of the wired gate: predicted vs measured capacity and objective, why launched."""
    why = {r["number"]: r for r in records if r["event"] == "launched" and "number" in r}
    return [{"number": m["number"], "predicted_capacity": m["predicted_capacity"],
             "measured_capacity": m["measured_capacity"], "predicted_objective": m["predicted_objective"],
             "measured_objective": m["measured_objective"], "reason": why.get(m["number"], {}).get("reason", "")}
            for m in records if m["event"] == "measured"]


def first_at(measured: list[float | None], target: float) -> int | None:
    best = float("-inf")
    for i, v in enumerate(measured, 1):
        best = max(best, v if v is not None else float("-inf"))
        if best >= target:
            return i
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=30, help="real trials of the search without the loop")
    ap.add_argument("--pool", type=int, default=40, help="simulated trials that propose the loop's candidates")
    ap.add_argument("--ref-sample", type=int, default=40)
    ap.add_argument("--duration-s", type=float, default=10.0, help="load point length (study: 30 s)")
    ap.add_argument("--max-points", type=int, default=8, help="load points per capacity search (study: 8)")
    ap.add_argument("--log", type=Path, default=None, help="write every seed's per-trial records here (JSON)")
    a = ap.parse_args()
    path = ROOT / "studies" / "static-levers.yaml"
    data = load_yaml(path)
    data["capacity"] = {**data["capacity"], "duration_s": a.duration_s, "max_points": a.max_points}
    study = validate(Study, data, str(path))
    space = build_space(study, ROOT / "studies")
    real = Scorer(study, space, replace(FITTED, **{k: getattr(FITTED, k) * f for k, f in PERTURB.items()}))
    sim = Scorer(study, space, None)
    print(f"real engine = simulator with {', '.join(f'{k} x{f}' for k, f in PERTURB.items())}")
    search(real, study, a.ref_sample, 10_000, optuna.samplers.RandomSampler(seed=10_000))  # reference sample

    arms: dict[int, dict[str, Any]] = {}
    for seed in range(a.seeds):
        without = search(real, study, a.budget, seed)
        pool = search(sim, study, a.pool, seed)  # milliseconds each on a real study: no GPU
        configs = {sim.key(e, args): (e, args) for e, args, _ in pool}
        cands = []
        for k, (e, args) in configs.items():
            r = sim.score(e, args)
            cands.append(Candidate(k, r.objective if _ok(r) else None, r.capacity, why_none=r.reason))

        def measure(k: Any, configs: dict[Any, tuple[str, dict[str, Any]]] = configs
                    ) -> tuple[float | None, float | None]:
            e, args = configs[k]
            r = real.score(e, args)
            return (r.objective if _ok(r) else None), r.capacity

        records = gated_search(cands, measure, first=sim.key(pool[0][0], pool[0][1]))
        arms[seed] = {"without": without, "records": records, "wired": wired(real, study, a.budget, seed, a.pool)}
    opt = real.best()
    target = 0.95 * opt
    print(f"true optimum (best real objective over {a.ref_sample} random configs and every launched one): "
          f"{opt:.1f}; target {target:.1f}")
    with_n, without_n, spent, log, wired_n, wired_spent = [], [], [], {}, [], []
    wired_log: dict[int, list[dict[str, Any]]] = {}
    for seed, arm in arms.items():
        best, n_wo = float("-inf"), None
        for i, (_, _, r) in enumerate(arm["without"], 1):
            if _ok(r):
                best = max(best, r.objective)
            if best >= target:
                n_wo = i
                break
        n_w = real_trials_to(arm["records"], target)
        launched = sum(r.launched for r in arm["records"])
        best_loop = max((r.measured for r in arm["records"] if r.measured is not None), default=0.0)
        print(f"seed {seed}: without loop {n_wo or f'>{a.budget}'} real trials; with loop {n_w or 'never'} "
              f"({launched} launched of {len(arm['records'])} candidates, best {best_loop / opt:.3f} of optimum)")
        w_measured, w_skipped, w_records = arm["wired"]
        n_wired = first_at(w_measured, target)
        print(f"        wired gate (tuner.run's path): {n_wired or 'never'} real trials to 95 %; "
              f"{len(w_measured)} launched, {w_skipped} skipped, best "
              f"{max((v for v in w_measured if v is not None), default=0.0) / opt:.3f} of optimum")
        wired_n.append(n_wired or a.budget + 1)
        wired_spent.append(len(w_measured))
        spent.append(launched)
        without_n.append(n_wo or a.budget + 1)
        with_n.append(n_w or a.budget + 1)
        log[seed] = [asdict(r) | {"key": list(r.key)} for r in arm["records"]]
        wired_log[seed] = trial_log(w_records)
    print("seed 0, per candidate (order, predicted -> corrected/upper, measured, reason):")
    for r in log[0]:
        fmt = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        print(f"  {'#' + str(r['order']) if r['launched'] else 'skip':>5} pred {fmt(r['predicted'])} "
              f"-> {fmt(r['corrected'])}/{fmt(r['upper'])} measured {fmt(r['measured'])} "
              f"(cap pred {r['predicted_capacity']} meas {r['measured_capacity']}): {r['reason'][:110]}")
    print("seed 0, wired gate, per real trial (number, capacity predicted -> measured, objective predicted -> "
          "measured, why launched):")
    for t in wired_log[0]:
        fmt = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
        print(f"  #{t['number']:<3} cap {fmt(t['predicted_capacity'])} -> {fmt(t['measured_capacity'])}  obj "
              f"{fmt(t['predicted_objective'])} -> {fmt(t['measured_objective'])}: {t['reason'][:110]}")
    if a.log:
        a.log.parent.mkdir(parents=True, exist_ok=True)
        a.log.write_text(json.dumps({"pool_loop": log, "wired": wired_log}, indent=1, default=str))
    print(f"real trials the loop launched before it stopped (median over seeds): {statistics.median(spent):g} "
          f"(without the loop the search spends its whole budget: {a.budget})")
    print(f"wired gate (SearchCore + StudyGate, as python -m tuner.run): real trials to 95 % "
          f"{statistics.median(wired_n):g}, launched {statistics.median(wired_spent):g} (medians over seeds)")
    # every arm launches the engine's defaults first (promotion compares against them): 2 is the floor
    print(f"searched trials to 95 % beyond the baseline (medians): with loop {statistics.median(with_n) - 1:g}, "
          f"without {statistics.median(without_n) - 1:g}, wired gate {statistics.median(wired_n) - 1:g}")
    print(f"real_trials_to_95pct_with_loop={statistics.median(with_n):g} without_loop={statistics.median(without_n):g} "
          f"wired={statistics.median(wired_n):g}")


if __name__ == "__main__":
    main()
