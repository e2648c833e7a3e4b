"""`prompt_hold` (issue 17, benchmarks/sim_hold_fit.py): a prompt step's launch holds the tokens of the step before it,
the prompts' first tokens leave at the prompt step's own end, and the engine core launches one prompt step at a time.
Checked from a base with the other prompt-step terms off, with a launch of fixed length (no spread)."""

from __future__ import annotations

import dataclasses
from typing import Any

from tuner.load.records import Request, RequestRecord
from tuner.sim.calibration import FITTED
from tuner.sim.engine import SimulatedEngine

BASE = dataclasses.replace(FITTED, prompt_cpu_step_s=0.0, prompt_cpu_step_cv=0.0, prompt_cpu_layer_s=0.0, heat_slowdown=0.0,
                           prompt_defer=0.0, ingress_per_seq_s=0.0, ingress_rho_max=0.0, ingress_s=0.0, prompt_hold=0,
                           ingress_tok_s=0.0, sched_after_launch=0)
LAUNCH = 0.03
HOLD = {"prompt_hold": 1, "prompt_cpu_step_s": LAUNCH}
PROMPT = [Request(0, 0.0, 128, 2000), Request(1, 1.0, 2048, 20)]  # a decode running, then a 2048-token prompt


def _run(shape: str, reqs: list[Request], args: dict[str, Any] | None = None, **kw: float) -> list[RequestRecord]:
    cal = dataclasses.replace(BASE, **kw)  # type: ignore[arg-type]
    return SimulatedEngine(flavour="vllm", gpu="H200", shape=shape, args=args or {}, max_model_len=16384,
                           calibration=cal).run(reqs)


def _gaps(rec: RequestRecord) -> list[float]:
    t = rec.token_times
    return [b - a for a, b in zip(t, t[1:], strict=False)]


def test_the_launch_holds_the_step_before_and_the_first_token_leaves_with_the_prompt_step() -> None:
    """The decode's token before the prompt step waits for the longer of its own step and the launch (which starts
    with that step); the prompt step then takes what is left of its GPU work after that, or nothing more than the
    launch where the launch covers it (1.7B), and its end brings the prompt's first token with the decode's token; the
    step after it is a whole decode step."""
    for shape in ("qwen3-1.7b", "qwen3-32b"):
        plain = _run(shape, PROMPT)
        g0 = _gaps(plain[0])
        decode, prompt_step = sorted(g0)[len(g0) // 2], max(g0)  # the plain run's prompt step: all of its GPU time
        held = _run(shape, PROMPT, **HOLD)
        g1, t = _gaps(held[0]), held[0].token_times
        i = min(k for k in range(len(g1)) if t[k] > PROMPT[1].arrival_s and g1[k] > 1.2 * decode)
        assert abs(g1[i] - max(decode, LAUNCH)) < 2e-4, (shape, g1[i], decode)
        # (a launch-bound step still runs its sampling after its last kernel: o_step_s)
        rest = max(decode + prompt_step, LAUNCH + BASE.o_step_s) - max(decode, LAUNCH)
        assert abs(g1[i + 1] - rest) < 2e-4, (shape, g1[i + 1], rest)
        assert held[1].token_times[0] == t[i + 2]  # the first token with the prompt step's own tokens
        # the GPU cannot end the prompt step before its launch, so the next step runs whole after it
        assert abs(g1[i + 2] - decode) < 3e-4, (shape, g1[i + 2], decode)
        assert _run(shape, PROMPT, **HOLD, prompt_defer=0.3) == held  # no share is deferred with the hold


def test_one_engine_core_launches_one_prompt_step_at_a_time() -> None:
    """An 8192-token prompt in 2048-token chunks on 1.7B: four prompt steps in a row, each GPU step shorter than the
    launch, so the decode's tokens come one launch apart (the CPU launches them one after the other), where without
    the CPU's order they would come one decode step apart after the first."""
    reqs = [Request(0, 0.0, 128, 2000), Request(1, 1.0, 8192, 20)]
    args = {"max_num_batched_tokens": 2048, "long_prefill_token_threshold": 2048}
    held = _run("qwen3-1.7b", reqs, args, **HOLD)
    t, first = held[0].token_times, held[1].token_times[0]
    chunks = [b - a for a, b in zip(t, t[1:], strict=False) if reqs[1].arrival_s < a and b <= first]
    assert len(chunks) >= 4, chunks
    assert all(abs(g - LAUNCH) < 3e-4 for g in chunks[1:4]), chunks


def test_off_it_changes_nothing() -> None:
    assert _run("qwen3-4b", PROMPT, prompt_hold=0) == _run("qwen3-4b", PROMPT)
    assert _run("qwen3-4b", PROMPT, prompt_hold=0, prompt_cpu_step_s=LAUNCH) != _run("qwen3-4b", PROMPT, **HOLD)


def test_with_sched_after_launch_a_request_in_during_the_launch_joins_the_next_step() -> None:
    """`sched_after_launch`: the engine core schedules the step after a prompt step once that step's launch is over, so
    a request that comes in after the prompt step started but before its launch ended is in the next step (one step
    sooner than with the window closing at the step's start); one that comes before or after gets the same step."""
    shape = "qwen3-1.7b"

    def first_step(dt: float, window: int) -> int:
        reqs = [*PROMPT, Request(2, PROMPT[1].arrival_s + dt, 64, 5)]
        recs = _run(shape, reqs, **HOLD, sched_after_launch=window)
        return list(recs[0].token_times).index(recs[2].token_times[0])

    for dt in (0.01, 0.02, LAUNCH - 0.002):  # (the prompt step starts ~3 ms in; its launch ends LAUNCH in)
        assert first_step(dt, 1) == first_step(dt, 0) - 1, dt
    for dt in (0.001, LAUNCH + 0.005):
        assert first_step(dt, 1) == first_step(dt, 0), dt
    assert _run(shape, PROMPT, **HOLD, sched_after_launch=1) == _run(shape, PROMPT, **HOLD)  # one request: no change


def test_with_sched_after_launch_2_a_prompt_in_during_the_launch_holds_the_first_token() -> None:
    """`sched_after_launch` 2: the engine core hands out step N's tokens after it launched step N+1, so when a prompt
    reaches it during a prompt step's launch (and so joins the next step) the first prompt's token waits for the second
    prompt's launch and both first tokens leave about together; a prompt that comes after the launch leaves the first
    token where it was. (The window alone, 1, let the second prompt join the next step without charging its launch.)"""
    shape = "qwen3-1.7b"

    def firsts(dt: float, window: int) -> tuple[float, float]:
        reqs = [*PROMPT, Request(2, PROMPT[1].arrival_s + dt, 2048, 5)]
        recs = _run(shape, reqs, **HOLD, sched_after_launch=window)
        return recs[1].token_times[0], recs[2].token_times[0]

    for dt in (0.01, LAUNCH - 0.005):
        (a1, b1), (a2, b2) = firsts(dt, 1), firsts(dt, 2)
        assert a2 >= a1 + LAUNCH * 0.9, dt  # held by the second prompt's launch
        assert 0.0 < b2 - a2 < 0.1 * LAUNCH, dt  # the second's first token right after the first's
        assert b2 >= a1 + LAUNCH and b1 < b2, dt  # its launch runs after the first's (1 never charged it)
    for dt in (LAUNCH + 0.01, 0.2):
        assert firsts(dt, 2) == firsts(dt, 1), dt
    assert _run(shape, PROMPT, **HOLD, sched_after_launch=2) == _run(shape, PROMPT, **HOLD)  # one request: no change
