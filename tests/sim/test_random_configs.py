"""The simulator on configs nobody picked: random draws from both shipped search spaces (every lever allowed) on every
card and model shape in the catalog, with odd workloads (one-token prompts and outputs, prompts past the context,
bursts, idle gaps). Each run either refuses to start with a clear EngineStartError or gives every request exactly one
record that reads like a real client's: tokens in time order after the send, a failure always with its reason; and a
second run of the same inputs gives the same records."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import numpy as np
import optuna
import pytest

from tuner.common.errors import EngineStartError
from tuner.load.records import Request, RequestRecord
from tuner.search.space import Space, build_space
from tuner.sim import SimulatedEngine
from tuner.sim.catalog import known_gpus, known_shapes
from tuner.spec.load import load_study

REPO = Path(__file__).resolve().parents[2]
STUDY = f"""
name: random-configs
engine: [vllm, sglang]
allow: [fp8_weights, fp8_kv_cache, speculative_decoding]
model: {{name: Qwen/Qwen3-8B, max_model_len: 16384}}
search_space:
  vllm: {{file: {REPO / "search_spaces" / "vllm.yaml"}}}
  sglang: {{file: {REPO / "search_spaces" / "sglang.yaml"}}}
speculative:
  methods:
    eagle3: {{draft_model: org/eagle3-draft, acceptance_length: 2.5, at_tokens: 4}}
    dflash: {{draft_model: org/dflash-draft, acceptance_length: 3.0, at_tokens: 8, draft_layers: 2}}
    mtp: {{draft_model: org/mtp-draft, acceptance_length: 2.0}}
workload: {{profile: dynamic}}
sla: ["p99_ttft_ms <= 2000"]
budget: {{trials: 4}}
"""
CASES = 150


def _space(tmp: Path) -> tuple[Space, dict[str, dict[str, object]]]:
    f = tmp / "study.yaml"
    f.write_text(STUDY)
    study = load_study(f)
    return build_space(study, tmp), {k: v.model_dump() for k, v in study.speculative.methods.items()}


def _workload(rng: random.Random, seed: int) -> list[Request]:
    n = rng.choice([1, 3, 25, 60])
    rate = rng.choice([0.0, 0.5, 5.0, 40.0, 500.0])  # 0: all at once
    lo_in, hi_in = sorted(rng.choice([1, 16, 700, 3000, 20000]) for _ in range(2))
    lo_out, hi_out = sorted(rng.choice([1, 2, 50, 600]) for _ in range(2))
    r = np.random.default_rng(seed)
    t = np.cumsum(r.exponential(1.0 / rate, n)) if rate > 0 else np.zeros(n)
    return [Request(k, float(t[k]), int(r.integers(lo_in, hi_in + 1)), int(r.integers(lo_out, hi_out + 1)))
            for k in range(n)]


def _problems(reqs: list[Request], recs: list[RequestRecord]) -> list[str]:
    out = []
    if sorted(r.id for r in recs) != sorted(q.id for q in reqs):
        out.append(f"records for ids {sorted(r.id for r in recs)[:5]}..., requests {len(reqs)}")
    for rec in recs:
        if not rec.ok:
            if not rec.error:
                out.append(f"request {rec.id} failed without a reason")
            continue
        times = list(rec.token_times)
        if rec.output_tokens < 1 or rec.first_token_s is None or rec.done_s is None:
            out.append(f"request {rec.id} ok with {rec.output_tokens} tokens, first {rec.first_token_s}")
            continue
        if rec.first_token_s < rec.sent_s or rec.done_s < rec.first_token_s:
            out.append(f"request {rec.id}: sent {rec.sent_s}, first token {rec.first_token_s}, done {rec.done_s}")
        if any(b < a for a, b in zip(times, times[1:], strict=False)) or (times and times[-1] > rec.done_s + 1e-9):
            out.append(f"request {rec.id}: token times out of order")
        if not all(np.isfinite(times)):
            out.append(f"request {rec.id}: a token time is not finite")
    return out


def _key(recs: list[RequestRecord]) -> list[tuple[object, ...]]:
    return [(r.id, r.first_token_s, r.done_s, r.output_tokens, r.error, tuple(r.token_times)) for r in recs]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_configs_start_cleanly_or_refuse_and_every_record_is_whole(tmp_path: Path, seed: int) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space, methods = _space(tmp_path)
    sampler = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    rng = random.Random(seed)
    ran = refused = 0
    for case in range(CASES):
        engine, args = space.sample(sampler.ask())
        args, _ = space.engines[engine].apply_constraints(args)
        gpu, shape = rng.choice(known_gpus()), rng.choice(known_shapes())
        mml, tp = rng.choice([2048, 8192, 16384, 40960]), rng.choice([1, 1, 2, 4])
        reqs = _workload(rng, seed * 1000 + case)
        where = f"case {case}: {engine} {gpu} {shape} tp={tp} max_model_len={mml} {args}"
        make = partial(SimulatedEngine, flavour=engine, gpu=gpu, shape=shape, args=args, max_model_len=mml,
                       tensor_parallel_size=tp, speculative=methods)
        try:
            sim = make()
        except EngineStartError as e:
            assert str(e).strip(), where  # a refusal says why
            refused += 1
            continue
        recs = sim.run(reqs)
        problems = _problems(reqs, recs)
        assert not problems, f"{where}: {problems[:3]}"
        if case % 4 == 0:  # the same inputs again: the same records
            assert _key(make().run(reqs)) == _key(recs), where
        ran += 1
    assert ran >= CASES // 2, f"only {ran} of {CASES} random configs started ({refused} refused)"
