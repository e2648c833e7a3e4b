"""Per-batch-size speculative tokens chosen from a study's measurements and promoted (vLLM >= 0.25
`num_speculative_tokens_per_batch_size`). End to end: `python -m tuner.run` on the simulated engine
searches DFlash at K = 1, 4, 15 (concurrency capacity search: load points from 1 to 128 sequences);
promoted.yaml must carry a schedule built from those K, and the simulator running the promoted args must
decode faster at low load than the winner's fixed K while keeping its SLA capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tuner.promote.spec_schedule import KEY, choose
from tuner.search.prescreen import simulate
from tuner.spec.load import load_yaml, validate
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

DRAFT = "z-lab/Qwen3-8B-DFlash-b16"
SPACE = {"engine": "vllm", "params": {
    "speculative_config.method": {"type": "categorical", "choices": ["none", "dflash"], "default": "none",
                                  "output_class": "speculative_decoding", "choice_needs": {"dflash": "dflash"},
                                  "draft_arg": "speculative_config.model"},
    "speculative_config.num_speculative_tokens": {"type": "categorical", "choices": [1, 4, 15], "default": 3,
                                                  "when": {"speculative_config.method": ["dflash"]}}}}


def write_study(tmp: Path) -> Path:
    (tmp / "space.yaml").write_text(yaml.safe_dump(SPACE))
    data = {
        "name": "spec-schedule", "seed": 0, "engine": "sim", "sim": {"flavour": "vllm", "gpu": "H200", "mode": "virtual"},
        "model": {"name": "Qwen/Qwen3-8B", "served_name": "qwen3-8b", "max_model_len": 16384, "dtype": "bfloat16"},
        "allow": ["speculative_decoding"],
        "speculative": {"methods": {"dflash": {"draft_model": DRAFT, "acceptance_length": 5.0, "at_tokens": 15}}},
        "workload": {"profile": "static", "warmup_requests": 4},
        "capacity": {"mode": "concurrency", "low": 1, "high": 128, "tolerance": 0.1, "max_points": 8,
                     "requests_per_point": 64},
        "sla": ["p99_tpot_ms <= 12"], "objective": {"metric": "output_throughput"},
        "search_space": {"file": str(tmp / "space.yaml")}, "search": {"algorithm": "grid"},
        "budget": {"trials": 5, "max_concurrent": 1}, "promotion": {"confirm_runs": 1, "top_k": 1},
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _trial(n: int, args: dict, r: object) -> TrialResult:
    return TrialResult(trial_id=str(n), number=n, engine="sim", params={}, args=args, outcome=r.outcome,  # type: ignore[attr-defined]
                       objective=r.objective, capacity=r.capacity,  # type: ignore[attr-defined]
                       points=[{"load": p.load, **p.summary} for p in r.load_points])  # type: ignore[attr-defined]


def test_not_chosen_without_two_k_or_without_speculation(tmp_path: Path) -> None:
    study = validate(Study, load_yaml(write_study(tmp_path)), "study")
    base = _trial(0, {}, simulate(study, "vllm", {}))
    args = {"speculative_config": {"method": "dflash", "num_speculative_tokens": 4, "model": DRAFT}}
    k4 = _trial(1, args, simulate(study, "vllm", args))
    assert k4.outcome is TrialOutcome.OK
    assert choose(base, [base, k4], "vllm").entries is None  # the winner does not speculate
    one = choose(k4, [base, k4], "vllm")
    assert one.entries is None and "K=[4] only" in one.reason and one.apply(k4.args) == k4.args
    assert choose(k4, [base, k4], "sglang").entries is None  # no such option in SGLang


def _measured(n: int, k: int, pts: list[tuple[float, float]]) -> TrialResult:
    """A trial at fixed K whose load points had these (decode batch size, mean TPOT ms): one request per
    second, TTFT 0, E2E = batch x 1000 ms, so Little's law gives back the batch size."""
    args = {"speculative_config": {"method": "dflash", "num_speculative_tokens": k, "model": DRAFT}}
    points = [{"request_throughput": 1.0, "mean_ttft_ms": 0.0, "mean_e2el_ms": b * 1000, "mean_tpot_ms": t}
              for b, t in pts]
    return TrialResult(trial_id=str(n), number=n, engine="sim", params={}, args=args, outcome=TrialOutcome.OK,
                       objective=1.0, points=points)


def test_a_band_compares_every_k_that_reached_it() -> None:
    # K=4 stops at batch 42 (its best), K=1 and K=8 reach 46: band 32-63 is judged at 42, where K=4 wins
    k1 = _measured(1, 1, [(1, 3.0), (20, 6.0), (46, 9.0)])
    k4 = _measured(2, 4, [(1, 2.0), (20, 4.0), (42, 7.0)])
    k8 = _measured(3, 8, [(1, 1.0), (20, 5.0), (46, 10.0)])
    s = choose(k4, [k1, k4, k8], "vllm")
    assert s.entries == [[1, 7, 8], [8, 63, 4]], s.bands  # K=8 leads to batch ~10, K=4 after
    assert s.bands[-1]["tpot_ms_at"] == 42
    assert s.apply(k4.args)["speculative_config"]["num_speculative_tokens"] == 8


@pytest.mark.slow
def test_study_promotes_a_schedule_from_its_measured_k(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("--study", str(write_study(tmp_path)), "--output", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    promoted = yaml.safe_load((out / "promoted.yaml").read_text())
    eng = promoted["applications"][0]["args"]["engine_args"]
    sc = eng["speculative_config"]
    sched = sc[KEY]
    assert len(sched) >= 2 and sched[0][0] == 1, sched
    assert {k for _, _, k in sched} <= {1, 4, 15} and sc["num_speculative_tokens"] == max(k for _, _, k in sched)
    assert all(a[1] + 1 == b[0] for a, b in zip(sched, sched[1:], strict=False))
    assert "per-batch-size speculative tokens" in proc.stdout
    # the promoted args run on the simulator: faster decode at low load than the winner's fixed K, same capacity
    study = validate(Study, load_yaml(tmp_path / "study.yaml"), "study")
    summary = json.loads((out / "promotion.json").read_text())
    fixed = next(c["args"] for c in summary["candidates"] if c["trial_id"] == summary["trial_id"])
    assert KEY not in fixed["speculative_config"]  # the trial stays as measured (fixed K)
    assert summary["spec_schedule"]["entries"] == sched and summary["spec_schedule"]["bands"]
    a, b = simulate(study, "vllm", fixed), simulate(study, "vllm", eng)
    assert b.capacity is not None and a.capacity is not None and b.capacity >= a.capacity
    low_a, low_b = a.load_points[0].summary["mean_tpot_ms"], b.load_points[0].summary["mean_tpot_ms"]
    assert low_b < low_a, (low_a, low_b)
