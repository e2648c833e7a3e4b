"""Detailed `vllm bench serve` results (per-request arrays): stored slim, replayed at their own send times, and
their P99s given a bootstrap interval. A run the simulator itself produced must replay to itself exactly."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.sim.calibration import FITTED
from tuner.sim.detailed import bench_run, load_json, p99_intervals, quantile_interval, run_distribution
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import (
    RefPoint,
    detailed_run,
    figures,
    measured,
    replay_detailed,
    split_of,
    workload,
)

ROOT = Path(__file__).resolve().parents[2]


def _import_set() -> Any:
    spec = importlib.util.spec_from_file_location("import_bench_set", ROOT / "benchmarks" / "import_bench_set.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bench_json(point: RefPoint, shift: float, start_times: bool) -> dict[str, Any]:
    """What `vllm bench serve --save-detailed` writes, from a simulated run of the point (shuffled order, a
    perf_counter-like clock offset, the texts it carries). With start_times the sends lag the client's draw by
    0-30 ms (a replay must then use them, not the draw); without, they are the draw."""
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=point.shape, args=point.args,
                          max_model_len=point.max_model_len)
    reqs = workload(point)
    if start_times:
        lag = np.random.default_rng(2).uniform(0.0, 0.03, len(reqs))
        reqs = [dataclasses.replace(r, arrival_s=r.arrival_s + d) for r, d in zip(reqs, lag, strict=True)]
    recs = eng.run(reqs)
    order = np.random.default_rng(1).permutation(len(recs))
    data: dict[str, Any] = {**figures(recs), "num_prompts": len(recs), "completed": len(recs),
                            "input_lens": [recs[i].input_len for i in order],
                            "output_lens": [recs[i].output_tokens for i in order],
                            "ttfts": [recs[i].ttft_s for i in order],
                            "itls": [np.diff(recs[i].token_times).tolist() for i in order],
                            "generated_texts": ["word " * 512 for _ in order], "errors": ["" for _ in order]}
    if start_times:
        data["start_times"] = [shift + recs[i].sent_s for i in order]
    return data


@pytest.mark.parametrize("start_times", [True, False])
def test_a_simulated_detailed_run_replays_to_itself(tmp_path: Path, start_times: bool) -> None:
    point = RefPoint("qwen3-14b-x/default_r4", "bench_x_default_r4.json.gz", {}, 4.0, 60, set_name="set",
                     max_model_len=40960, shape="qwen3-14b")
    src = tmp_path / "src"
    src.mkdir()
    (src / "bench_x_default_r4.json").write_text(json.dumps(_bench_json(point, 1234.5, start_times)))
    (src / "rates_x_default.json").write_text("[]")
    (src / "server_x_default.log").write_text("log\n")
    pts = _import_set().import_set(src, tmp_path / "set", "x_default", "qwen3-14b", 40960, {})
    assert [(p["name"], p["rate"], p["prompts"], p["shape"], p["start_times"]) for p in pts] == [
        ("default_r4", 4.0, 60, "qwen3-14b", start_times)]
    stored = load_json(tmp_path / "set" / pts[0]["file"])
    assert "generated_texts" not in stored and "errors" not in stored and len(stored["ttfts"]) == 60
    assert {f.name for f in (tmp_path / "set").iterdir()} >= {"rates_x_default.json", "server_x_default.log.gz"}
    run = detailed_run(point, root=tmp_path)
    assert run is not None and len(run) == 60
    if start_times:  # send order restored, re-based to the first send, stored to the microsecond
        assert run.start_times is not None and run.start_times[0] == 0.0
        assert np.all(np.diff(run.start_times) > -0.03)
    sim_d, real_d = replay_detailed(point, run)
    for key in ("ttft", "itl"):  # equal up to the 1 us rounding of the stored times
        assert np.allclose(sim_d[key], real_d[key], rtol=0, atol=0.01), key
    if start_times:  # the sends were not the client's draw: replayed on the draw, the TTFTs differ
        drawn, _ = replay_detailed(point, dataclasses.replace(run, start_times=None))
        assert not np.allclose(drawn["ttft"], real_d["ttft"], rtol=0, atol=0.5)
    assert measured(point, root=tmp_path)["p99_itl_ms"] == pytest.approx(real_d["itl"][-1], abs=0.01)
    assert split_of(point) == "shape"  # no qwen3-14b point is fitted on


def test_the_p99_intervals_hold_the_measured_p99_and_150_requests_leave_the_ttft_one_open() -> None:
    rng = np.random.default_rng(0)

    def run(n: int) -> Any:
        return bench_run({"ttfts": rng.lognormal(-2, 0.6, n).tolist(), "itls": [rng.lognormal(-4, 0.5, 50).tolist()
                                                                                  for _ in range(n)],
                          "input_lens": [2048] * n, "output_lens": [51] * n})

    small, large = run(150), run(1200)
    for r in (small, large):
        ci = p99_intervals(r)
        p99 = run_distribution(r)
        assert ci["ttft"][0] <= p99["ttft"][-1] <= ci["ttft"][1]
        assert ci["itl"][0] <= p99["itl"][-1] <= ci["itl"][1]
    # 150 samples: P(all 150 lie below the true P99) = 0.99^150 = 22 % > 5 %: no finite upper bound
    assert p99_intervals(small)["ttft"] == (sorted(small.ttfts)[-5] * 1e3, math.inf)
    lo, hi = p99_intervals(large)["ttft"]
    assert math.isfinite(hi) and (hi - lo) / run_distribution(large)["ttft"][-1] < 0.4
    # the order-statistic interval covers the true quantile about 90 % of the time (iid lognormal, exact P99)
    true = math.exp(-2 + 0.6 * 2.3263479)
    hits = [lo <= true <= hi for lo, hi in (quantile_interval(rng.lognormal(-2, 0.6, 400)) for _ in range(300))]
    assert 0.85 <= sum(hits) / len(hits) <= 0.97


def test_the_step_timeline_finds_the_simulators_own_prompt_split() -> None:
    # benchmarks/prompt_steps.py on a simulated run: isolated 2048-token prompts on the Qwen3-14B shape. With the
    # shipped hold (prompt_hold) the decodes' token before the prompt step waits for its launch (14.1 ms + 40 layers x
    # 0.575 ms = 37.1 ms mean), and the prompt step, first token included, brings the rest: the two intervals add up
    # to the prompt step without a launch (the GPU's time is the same) and the first token comes no later
    spec = importlib.util.spec_from_file_location("prompt_steps", ROOT / "benchmarks" / "prompt_steps.py")
    assert spec is not None and spec.loader is not None
    ps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ps)
    point = RefPoint("x", "x.json", {}, 1.0, 40, output_len=256, max_model_len=40960, shape="qwen3-14b")
    # a send every 0.6 s: about four requests decoding at a time, every prompt isolated
    reqs = [dataclasses.replace(r, arrival_s=0.6 * i) for i, r in enumerate(workload(point))]
    rows, base, n = ps.around_prompts(ps.sim_timeline(point, reqs))
    no_launch = dataclasses.replace(FITTED, prompt_cpu_step_s=0.0, prompt_cpu_layer_s=0.0)
    rows0, base0, _ = ps.around_prompts(ps.sim_timeline(point, reqs, no_launch))
    assert n >= 30 and 8.0 < base < 12.0 and abs(base - base0) < 1e-9
    launch = (FITTED.prompt_cpu_step_s + 40 * FITTED.prompt_cpu_layer_s) * 1e3
    lead, rest = np.median(rows[:, 1]) + base, np.median(rows[:, 2]) + base
    assert abs(lead - launch) < 5.0, (lead, launch)
    assert abs(np.median(rows0[:, 1])) < 1.0  # without a launch the step before is a plain decode step
    assert abs((lead - base) + rest - (np.median(rows0[:, 2]) + base)) < 0.5  # the GPU's time, split
    assert np.median(rows[:, 5]) <= np.median(rows0[:, 5]) + 0.5  # TTFT
    assert abs(np.median(rows[:, 0])) < 1.0 and abs(np.median(rows[:, 3])) < 1.0
