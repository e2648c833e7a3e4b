"""Pre-screen the H200 study's configs on the calibrated simulator, here, at no GPU time.

A real trial costs 50-140 s of server start plus its load points; the session has ~4 of them. So the
whole (small, categorical) space is first run through the same trial code with the simulated
engine in virtual time (tuner.trial.runner.run_trial, engine "sim", same workload, SLA and capacity
search), and the best predicted configs are handed to the device driver as `--enqueue` (tried
right after the baseline, before Optuna's own samples). Configs the simulator cannot tell apart
(same capacity, objective within 10 tok/s) form one group, and only the best of each group that
differs from the baseline's is kept: the few real trials then spread over distinct predicted
behaviours instead of re-measuring near-copies.

    python scripts/h200/prescreen.py studies/h200-static.yaml --top 3 --json /tmp/prescreen.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tuner.search.space import Rejected, build_space  # noqa: E402
from tuner.spec.load import load_study  # noqa: E402
from tuner.spec.study import SimSettings, Study  # noqa: E402
from tuner.trial.runner import TrialPlan, run_trial  # noqa: E402


def sim_study(study: Study) -> Study:
    """The same study on the simulated engine (vLLM flavour, H200, virtual time)."""
    return study.model_copy(update={"engine": "sim", "sim": SimSettings(flavour="vllm", gpu="H200", mode="virtual")})


def screen(study: Study, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run every config (None = the engine's defaults) through a virtual-time trial."""
    sim = sim_study(study)
    sp = build_space(study, REPO).engines[study.engine_names[0]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, params in enumerate(configs):
            try:
                args, _ = sp.apply_constraints(params)
            except Rejected as exc:
                rows.append({"params": params, "outcome": "rejected", "reason": str(exc)})
                continue
            t0 = time.monotonic()
            plan = TrialPlan(trial_id=f"s{i:03d}", number=i, engine="sim", args=args, params=params,
                             baseline=not params, seed=study.seed)
            r = run_trial(sim, plan, Path(tmp) / plan.trial_id, base_dir=REPO)
            rows.append({"params": params, "outcome": r.outcome.value, "capacity": r.capacity,
                         "objective": r.objective, "ttft_p99_ms": r.metrics.get("p99_ttft_ms"),
                         "tpot_p99_ms": r.metrics.get("p99_tpot_ms"), "sim_s": round(time.monotonic() - t0, 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", type=Path)
    p.add_argument("--top", type=int, default=3)
    p.add_argument("--json", type=Path, default=None, help="write all rows and the top configs here")
    args = p.parse_args(argv)
    study = load_study(args.study)
    sp = build_space(study, REPO).engines[study.engine_names[0]]
    configs: list[dict[str, Any]] = [{}, *sp.grid()]
    rows = screen(study, configs)
    ranked = sorted((r for r in rows if r["params"] and r.get("objective") is not None),
                    key=lambda r: -r["objective"])
    base = next(r for r in rows if not r["params"])
    print(f"{'config':58s} {'outcome':13s} {'cap':>6s} {'out tok/s':>10s} {'TTFT99':>8s} {'TPOT99':>7s}")
    for r in [base, *ranked, *(r for r in rows if r["params"] and r.get("objective") is None)]:
        name = json.dumps(r["params"]) if r["params"] else "(defaults)"
        print(f"{name:58s} {r['outcome']:13s} {_f(r.get('capacity')):>6s} {_f(r.get('objective')):>10s} "
              f"{_f(r.get('ttft_p99_ms')):>8s} {_f(r.get('tpot_p99_ms')):>7s}")
    top = distinct(base, ranked)[: args.top]
    print("enqueue:", json.dumps(top))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "top": top}, indent=1, default=str))
    return 0


def distinct(base: dict[str, Any], ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Best config of each group of equal predictions, skipping the baseline's group."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        obj = r.get("objective")
        return (r.get("capacity"), None if obj is None else round(obj, -1))

    seen = {key(base)}
    out = []
    for r in ranked:
        if key(r) not in seen:
            seen.add(key(r))
            out.append(r["params"])
    return out


def _f(v: Any) -> str:
    return "-" if v is None else f"{v:.1f}"


if __name__ == "__main__":
    sys.exit(main())
