"""SGLang's triton decode form: the per-sequence context term (`SGLangTerms.triton_kv_seq_s` ->
`Calibration.kv_seq_s`: a decode-only step of n sequences with C context tokens in all lasts kv_seq x C / n longer)
and its own fixed time (`triton_decode_s`, in place of `step_extra_s` on decode-only steps). Both off in the shipped
calibration; these tests hold the simulator to the form whenever it is set."""

from __future__ import annotations

import dataclasses
import statistics

import pytest
from simhelp import poisson

from tuner.load.records import Request
from tuner.sim.calibration import FITTED, SGLANG_FITTED
from tuner.sim.engine import SimulatedEngine
from tuner.sim.sglang_cost import SGLangTerms

TRITON = {"attention_backend": "triton"}
KV_SEQ = 4e-7  # s per context token per sequence: 0.4 ms per 1,000 tokens of context per sequence


def _engine(terms: SGLangTerms, args: dict[str, object] | None = None) -> SimulatedEngine:
    return SimulatedEngine(flavour="sglang", gpu="H200", shape="qwen3-8b", args=dict(TRITON if args is None else args),
                           max_model_len=16384, sglang_terms=terms)


def test_one_sequence_pays_its_context() -> None:
    """Alone, every decode step of a 4,000-token prompt lasts kv_seq x its context longer."""
    req = [Request(0, 0.0, 4000, 200)]
    off = _engine(SGLANG_FITTED).run(req)[0]
    on = _engine(dataclasses.replace(SGLANG_FITTED, triton_kv_seq_s=KV_SEQ)).run(req)[0]
    gaps_off = [b - a for a, b in zip(off.token_times[1:], off.token_times[2:], strict=False)]
    gaps_on = [b - a for a, b in zip(on.token_times[1:], on.token_times[2:], strict=False)]
    extra = statistics.median(gaps_on) - statistics.median(gaps_off)
    assert extra == pytest.approx(KV_SEQ * 4100, rel=0.03)  # the median step's context: ~4,000 + 100 tokens


def test_the_term_is_per_sequence_not_per_token() -> None:
    """Eight sequences of the same context pay the same extra per step as one (the mean context per sequence),
    where a KV-read term would pay eight times as much."""
    def extra(n: int) -> float:
        reqs = [Request(i, 0.0, 3000, 300) for i in range(n)]
        med = []
        for terms in (SGLANG_FITTED, dataclasses.replace(SGLANG_FITTED, triton_kv_seq_s=KV_SEQ)):
            rec = _engine(terms).run(reqs)[-1]
            med.append(statistics.median(b - a for a, b in zip(rec.token_times[-200:], rec.token_times[-199:],
                                                                strict=False)))
        return med[1] - med[0]

    assert extra(8) == pytest.approx(extra(1), rel=0.05)
    assert extra(1) == pytest.approx(KV_SEQ * 3200, rel=0.05)


def test_only_triton_pays_it() -> None:
    reqs = [Request(0, 0.0, 4000, 100)]
    terms = dataclasses.replace(SGLANG_FITTED, triton_kv_seq_s=KV_SEQ)
    assert (_engine(terms, {}).run(reqs)[0].token_times == _engine(SGLANG_FITTED, {}).run(reqs)[0].token_times)
    assert _engine(terms).run(reqs)[0].e2e_s > _engine(SGLANG_FITTED).run(reqs)[0].e2e_s


def _gaps(rec: object) -> list[float]:
    times = rec.token_times  # type: ignore[attr-defined]
    return [b - a for a, b in zip(times[1:], times[2:], strict=False)]


def test_decode_time_replaces_the_step_extra_on_decode_steps_only() -> None:
    """triton_decode_s moves every decode step by (it - step_extra_s) and leaves the prefill (the first token) alone:
    the prefill terms were fitted with step_extra_s on the prefill steps."""
    req = [Request(0, 0.0, 4000, 200)]
    terms = dataclasses.replace(SGLANG_FITTED, triton_decode_s=SGLANG_FITTED.step_extra_s - 1e-3)
    off, on = _engine(SGLANG_FITTED).run(req)[0], _engine(terms).run(req)[0]
    assert on.first_token_s == pytest.approx(off.first_token_s, abs=1e-12)
    for a, b in zip(_gaps(off), _gaps(on), strict=True):
        assert a - b == pytest.approx(1e-3, rel=1e-6)
    assert _engine(terms, {}).run(req)[0].token_times == _engine(SGLANG_FITTED, {}).run(req)[0].token_times


@pytest.mark.parametrize("args", [TRITON, {**TRITON, "mem_fraction_static": 0.14, "page_size": 16}])
def test_closed_form_runs_equal_step_by_step(args: dict[str, object]) -> None:
    """The closed-form decode runs (Core._decode_run) must give the records of one step at a time with the term on."""
    reqs = poisson(120, 8.0, inp=(50, 4000), out=(1, 600), seed=7)
    terms = dataclasses.replace(SGLANG_FITTED, triton_kv_seq_s=KV_SEQ, triton_decode_s=-3e-4)
    fast, slow = _engine(terms, args), _engine(terms, args)
    slow.macro_steps = False
    for x, y in zip(fast.run(reqs), slow.run(reqs), strict=True):
        assert (x.error, x.preemptions, len(x.token_times)) == (y.error, y.preemptions, len(y.token_times))
        assert x.token_times == pytest.approx(y.token_times, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("field", ["kv_seq_s", "dec_step_extra_s"])
def test_vllm_refuses_the_terms(field: str) -> None:
    """vLLM's per-step paths do not carry them, so a vLLM engine with one set is an error, not a silent mismatch."""
    cal = dataclasses.replace(FITTED, **{field: KV_SEQ})
    with pytest.raises(ValueError, match=field):
        SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384, calibration=cal)
