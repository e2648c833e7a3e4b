"""The CPU-side terms tried on five shapes (issue 17, benchmarks/sim_shape_cpu.py, sim_jitter_fit.py): a prompt's CPU
floor (`prompt_cpu_tok_s`, `prompt_cpu_step_s` and its spread) and the API server's
busy share stretching a new prompt's ingress (`ingress_rho_max`). These check what each does when on, from a base with
all of them off, and that off they change nothing."""

from __future__ import annotations

import dataclasses

from tuner.load.records import Request, RequestRecord
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.engine import SimulatedEngine

# FITTED with the CPU-side terms and the heat term off (whatever a calibration ships with): each test turns on the one
# it checks
BASE = dataclasses.replace(FITTED, prompt_cpu_step_s=0.0, prompt_cpu_step_cv=0.0, prompt_cpu_layer_s=0.0, heat_slowdown=0.0,
                           prompt_hold=0, ingress_rho_max=0.0, ingress_s=0.0, ingress_tok_s=0.0, sched_after_launch=0)


def _run(shape: str, reqs: list[Request], **kw: float) -> list[RequestRecord]:
    cal: Calibration = dataclasses.replace(BASE, **kw)  # type: ignore[arg-type]
    return SimulatedEngine(flavour="vllm", gpu="H200", shape=shape, args={}, max_model_len=16384,
                           calibration=cal).run(reqs)


def _gaps(rec: RequestRecord) -> list[float]:
    t = rec.token_times
    return [b - a for a, b in zip(t, t[1:], strict=False)]


PROMPT = [Request(0, 0.0, 128, 2000), Request(1, 1.0, 2048, 20)]  # a decode running, then a 2048-token prompt
PLAIN = {"prompt_defer": 0.0, "ingress_per_seq_s": 0.0}  # the prompt's whole step before the decode's next token


def test_prompt_cpu_floor_sets_a_small_models_prompt_step() -> None:
    u = 20e-6  # 41 ms for 2048 tokens: above Qwen3-1.7B's GPU prefill (~10 ms)
    off = _gaps(_run("qwen3-1.7b", PROMPT, **PLAIN)[0])
    on = _gaps(_run("qwen3-1.7b", PROMPT, **PLAIN, prompt_cpu_tok_s=u)[0])
    k = max(range(len(on)), key=on.__getitem__)
    assert abs(on[k] - (on[k - 1] + 2048 * u)) < 1e-6  # the decodes alone + the prompt's CPU time
    assert off[k] - off[k - 1] < 0.5 * 2048 * u  # without it the GPU's extra time is well below that
    assert max(abs(a - b) for a, b in zip(on[:k], off[:k], strict=True)) < 1e-12  # the same before the prompt step


def test_prompt_cpu_floor_leaves_a_large_models_prompt_step() -> None:
    # Qwen3-32B's GPU prefill of 2048 tokens (~200 ms) covers 41 ms of CPU time: the same records
    assert _run("qwen3-32b", PROMPT, prompt_cpu_tok_s=20e-6) == _run("qwen3-32b", PROMPT)


def test_prompt_cpu_step_floor_is_paid_once_per_prompt_step() -> None:
    """`prompt_cpu_step_s`: a fixed part of the floor per step that takes in prompts, however many; the same floor
    per prompt token (two 1024-token prompts in one step) is paid for each prompt's tokens."""
    f, u = 0.03, 2e-6
    one = _gaps(_run("qwen3-1.7b", PROMPT, **PLAIN, prompt_cpu_step_s=f, prompt_cpu_tok_s=u)[0])
    k = max(range(len(one)), key=one.__getitem__)
    assert abs(one[k] - (one[k - 1] + f + 2048 * u)) < 1e-6  # the decodes alone + F + u x the prompt tokens
    two = [PROMPT[0], Request(1, 1.0, 1024, 20), Request(2, 1.0, 1024, 20)]  # two prompts sent together
    both = _gaps(_run("qwen3-1.7b", two, **PLAIN, prompt_cpu_step_s=f, prompt_cpu_tok_s=u)[0])
    assert max(both) < one[k - 1] + 2 * f  # one F for the step, not one per prompt
    assert _run("qwen3-1.7b", PROMPT, prompt_cpu_step_s=0.0) == _run("qwen3-1.7b", PROMPT)  # off: nothing changes


def test_prompt_cpu_step_spread_draws_each_prompt_steps_floor_reproducibly() -> None:
    """`prompt_cpu_step_cv`: each prompt step's fixed floor is drawn (gamma, mean `prompt_cpu_step_s`) from a generator
    seeded per run: prompt steps differ in length, the same run gives the same records, another `jitter_seed` others."""
    f = 0.03
    reqs = [Request(0, 0.0, 128, 4000)] + [Request(i, 0.25 * i, 2048, 4) for i in range(1, 41)]  # 40 isolated prompts
    kw = {**PLAIN, "prompt_cpu_step_s": f}
    fixed = _gaps(_run("qwen3-1.7b", reqs, **kw)[0])
    drawn = _gaps(_run("qwen3-1.7b", reqs, **kw, prompt_cpu_step_cv=0.5)[0])
    decode = sorted(fixed)[len(fixed) // 2]
    steps_fixed = [g for g in fixed if g > decode + 0.5 * f]
    steps_drawn = [g - decode for g in drawn if g > decode + 0.002]
    assert len(steps_fixed) == 40 and max(steps_fixed) - min(steps_fixed) < 1e-3  # one length without the spread
    assert len(steps_drawn) >= 35 and max(steps_drawn) - min(steps_drawn) > 0.5 * f  # spread with it
    assert 0.7 * f < sum(steps_drawn) / len(steps_drawn) < 1.3 * f  # around the same mean
    assert _run("qwen3-1.7b", reqs, **kw, prompt_cpu_step_cv=0.5) == _run("qwen3-1.7b", reqs, **kw,
                                                                          prompt_cpu_step_cv=0.5)
    other = _gaps(_run("qwen3-1.7b", reqs, **kw, prompt_cpu_step_cv=0.5, jitter_seed=1)[0])
    assert other != drawn
    assert _run("qwen3-1.7b", reqs, **PLAIN, prompt_cpu_step_cv=0.5) == _run("qwen3-1.7b", reqs, **PLAIN)  # no floor


def test_prompt_cpu_step_spread_draws_the_admission_cpu_too() -> None:
    """With `admit_step_s` (hidden behind the step before) the same spread draws each admitting step's CPU time."""
    reqs = [Request(0, 0.0, 128, 4000)] + [Request(i, 0.25 * i, 16, 4) for i in range(1, 41)]  # short prompts
    kw = {**PLAIN, "admit_step_s": 0.02}
    fixed = _gaps(_run("qwen3-1.7b", reqs, **kw)[0])
    drawn = _gaps(_run("qwen3-1.7b", reqs, **kw, prompt_cpu_step_cv=0.5)[0])
    decode = sorted(fixed)[len(fixed) // 2]
    late_fixed = [g for g in fixed if g > decode + 0.005]
    late_drawn = [g for g in drawn if g > decode + 0.002]
    assert len(late_fixed) == 40 and max(late_fixed) - min(late_fixed) < 1e-3
    assert len(late_drawn) >= 35 and max(late_drawn) - min(late_drawn) > 0.01


def test_ingress_rho_stretches_a_new_prompts_wait_when_the_api_server_is_busy() -> None:
    reqs = [Request(i, 0.0, 16, 600) for i in range(120)] + [Request(120, 0.5, 512, 4)]
    base = _run("qwen3-1.7b", reqs)[-1]
    busy = _run("qwen3-1.7b", reqs, ingress_rho_max=0.9)[-1]
    assert base.first_token_s is not None and busy.first_token_s is not None
    # 120 sequences x 81 us = 9.7 ms of streaming per ~9 ms step: rho at its cap, the wait x10 (~+87 ms)
    assert busy.first_token_s - base.first_token_s > 0.05
    # no per-sequence ingress cost: nothing to stretch
    assert _run("qwen3-1.7b", reqs, ingress_per_seq_s=0.0, ingress_rho_max=0.9) == _run(
        "qwen3-1.7b", reqs, ingress_per_seq_s=0.0)


# ---- the request-admission terms measured on the H200 (benchmarks/ttft_breakdown.py; off in the committed fit)

def test_ingress_delays_an_idle_engines_first_token_by_fixed_plus_per_prompt_token() -> None:
    reqs = [Request(0, 0.0, 16, 4), Request(1, 1.0, 2048, 4)]
    off = _run("qwen3-8b", reqs)
    on = _run("qwen3-8b", reqs, ingress_s=4.5e-3, ingress_tok_s=3e-6)
    for r_off, r_on, n_in in zip(off, on, (16, 2048), strict=True):
        assert r_off.first_token_s is not None and r_on.first_token_s is not None
        # an idle engine: the request only starts later, by 4.5 ms + 3 us x its prompt tokens
        assert abs((r_on.first_token_s - r_off.first_token_s) - (4.5e-3 + 3e-6 * n_in)) < 1e-9
        assert r_on.sent_s == r_off.sent_s  # the client's send time is the same: TTFT grows
    # the per-token part alone (no fixed part) counts too
    tok_only = _run("qwen3-8b", reqs, ingress_tok_s=3e-6)
    for r_off, r_on, n_in in zip(off, tok_only, (16, 2048), strict=True):
        assert r_off.first_token_s is not None and r_on.first_token_s is not None
        assert abs((r_on.first_token_s - r_off.first_token_s) - 3e-6 * n_in) < 1e-9


def test_admit_cpu_shows_only_where_the_step_before_does_not_hide_it() -> None:
    reqs = [Request(0, 0.0, 16, 150), Request(1, 0.1, 1024, 8)]  # a decode running, then a 1024-token prompt
    on = _gaps(_run("qwen3-1.7b", reqs, **PLAIN, admit_cpu_s=12e-3)[0])
    off = _gaps(_run("qwen3-1.7b", reqs, **PLAIN)[0])
    k, ko = (max(range(len(g)), key=g.__getitem__) for g in (on, off))  # the prompt's step (the stream started
    # 12 ms later with the term on: its first request found the engine idle, so its own admission showed whole)
    # the admitting step ends 12 ms - (the step before) later: the CPU work overlapped that step's GPU time
    # (and the prompt's step, ~4 ms above a decode step, stands out from the decodes around it)
    assert abs(on[k] - (off[ko] + 12e-3 - off[ko - 1])) < 1e-5 and off[ko - 1] < 3e-3 < off[ko] - off[ko - 1]
    assert max(abs(a - b) for a, b in zip(on[:k], off[:k], strict=True)) < 1e-9  # the decode steps before: the same
    # Qwen3-32B's decode step (~17 ms) is longer than 12 ms of CPU: the running stream's steps do not change
    big_on, big_off = (_gaps(_run("qwen3-32b", reqs, **PLAIN, admit_cpu_s=a)[0]) for a in (12e-3, 0.0))
    assert max(abs(a - b) for a, b in zip(big_on, big_off, strict=True)) < 1e-9
    # an idle engine hides none of it: a lone request's first token comes 12 ms later
    lone_on, lone_off = (_run("qwen3-32b", [Request(0, 0.0, 16, 4)], admit_cpu_s=a)[0] for a in (12e-3, 0.0))
    assert lone_on.first_token_s is not None and lone_off.first_token_s is not None
    assert abs(lone_on.first_token_s - lone_off.first_token_s - 12e-3) < 1e-9


def test_ingress_serves_one_request_at_a_time_in_send_order() -> None:
    # a 2048-token prompt, then a 16-token one sent 1 us later: the API server hands the short one on only after
    # the long one's 6.1 ms (3 us per token), as the H200 burst probe's growing client-side share shows
    reqs = [Request(0, 0.0, 2048, 4), Request(1, 1e-6, 16, 4)]
    long, short = _run("qwen3-1.7b", reqs, ingress_tok_s=3e-6)
    assert long.first_token_s is not None and short.first_token_s is not None
    assert short.first_token_s > 2048 * 3e-6 + 16 * 3e-6
    alone = _run("qwen3-1.7b", [Request(1, 1e-6, 16, 4)], ingress_tok_s=3e-6)[0]
    assert alone.first_token_s is not None and alone.first_token_s < 2048 * 3e-6  # alone, it would be done by then


def test_admit_step_is_paid_once_per_admitting_step_admit_cpu_per_request() -> None:
    def stall(burst: int, **kw: float) -> float:
        bg = Request(0, 0.0, 16, 150)
        t = _run("qwen3-1.7b", [bg], **PLAIN)[0].token_times[29]  # the probe goes out at the 30th token
        recs = _run("qwen3-1.7b", [bg] + [Request(1 + k, t, 16, 8) for k in range(burst)], **PLAIN, **kw)
        return max(_gaps(recs[0]))

    base1, base8 = stall(1), stall(8)
    step1, step8 = stall(1, admit_step_s=12e-3), stall(8, admit_step_s=12e-3)
    per1, per8 = stall(1, admit_cpu_s=12e-3), stall(8, admit_cpu_s=12e-3)
    assert abs(step1 - per1) < 1e-9  # one new request: the two forms agree
    # eight sent at once are admitted in one step: per step, the same 12 ms as one; per request, 8 x 12 ms
    assert abs((step8 - base8) - (step1 - base1)) < 1e-5  # (eight prompts in one step: microseconds more)
    assert abs((per8 - base8) - (step8 - base8) - 7 * 12e-3) < 1e-5


def test_stream_tok_delays_tokens_by_the_api_servers_backlog() -> None:
    reqs = [Request(i, 0.0, 64, 40) for i in range(100)]  # 100 streams, steps of a few ms
    off = _run("qwen3-1.7b", reqs)
    light = _run("qwen3-1.7b", reqs, stream_tok_s=1e-6)  # 100 us of work per step: no backlog builds
    heavy = _run("qwen3-1.7b", reqs, stream_tok_s=200e-6)  # 20 ms per step, longer than the step: it grows
    for a, b, c in zip(off, light, heavy, strict=True):
        assert list(b.token_times) == sorted(b.token_times) and list(c.token_times) == sorted(c.token_times)
        assert b.first_token_s == b.token_times[0] and c.done_s == c.token_times[-1]
        shift = [y - x for x, y in zip(a.token_times, b.token_times, strict=True)]
        assert min(shift) >= 0.0 and max(shift) <= 100e-6 + 1e-9  # at most one step's work late
    step = off[0].token_times[-1] - off[0].token_times[-2]
    assert step < 20e-3  # the engine's step is shorter than the server's 20 ms per step
    # saturated: the server sends a step's tokens every 20 ms, so the last token leaves ~40 x (20 ms - step) late
    late = heavy[-1].token_times[-1] - off[-1].token_times[-1]
    assert late > 30 * (20e-3 - step)
    gaps = [y - x for x, y in zip(heavy[0].token_times[5:], heavy[0].token_times[6:], strict=False)]
    assert min(gaps) > 19e-3  # in the backlog a stream gets a token per 20 ms of the server's work


def test_api_passes_queue_a_new_request_behind_the_streaming_backlog() -> None:
    reqs = [Request(i, 0.0, 64, 200) for i in range(100)] + [Request(100, 0.3, 64, 4)]  # a prompt sent 0.3 s in
    kw = {"ingress_s": 1e-3, "ingress_per_seq_s": 0.0}
    alone = _run("qwen3-1.7b", reqs, stream_tok_s=200e-6, **kw)  # streaming late, the request's own FIFO only
    coupled = _run("qwen3-1.7b", reqs, stream_tok_s=200e-6, api_passes=3, **kw)
    # the server owes 100 x 200 us = 20 ms per engine step of a few ms: 0.3 s in, it is ~0.2 s behind
    backlog = coupled[0].token_times[0] - _run("qwen3-1.7b", reqs, **kw)[0].token_times[0]
    assert backlog > 0.0
    new_alone, new_coupled = alone[-1], coupled[-1]
    assert new_alone.first_token_s is not None and new_coupled.first_token_s is not None
    assert new_coupled.first_token_s - new_alone.first_token_s > 0.1  # it waited for the backlog, not 1 ms
    # a light stream builds no backlog: coupling changes the new request's TTFT by at most its streaming share
    light = _run("qwen3-1.7b", reqs, stream_tok_s=1e-6, **kw)[-1]
    light_c = _run("qwen3-1.7b", reqs, stream_tok_s=1e-6, api_passes=3, **kw)[-1]
    assert light.first_token_s is not None and light_c.first_token_s is not None
    assert abs(light_c.first_token_s - light.first_token_s) < 1e-3
    # api_passes without stream_tok_s: nothing to queue behind, the same records
    assert _run("qwen3-1.7b", reqs, api_passes=3, **kw) == _run("qwen3-1.7b", reqs, **kw)


def test_stream_chunk_batches_steps_so_the_server_catches_up() -> None:
    reqs = [Request(i, 0.0, 64, 40) for i in range(100)]
    off = _run("qwen3-1.7b", reqs)
    fifo = _run("qwen3-1.7b", reqs, stream_tok_s=200e-6)  # a job per step: the backlog grows to the end
    batched = _run("qwen3-1.7b", reqs, stream_tok_s=20e-6, stream_chunk_s=180e-6)  # same 200 us idle, per token
    for r in batched:
        assert list(r.token_times) == sorted(r.token_times) and r.done_s == r.token_times[-1]
    # behind, one chunk per request carries several steps' tokens: far less late than the per-step FIFO
    late_fifo = fifo[-1].token_times[-1] - off[-1].token_times[-1]
    late_batched = batched[-1].token_times[-1] - off[-1].token_times[-1]
    assert late_fifo > 0.3 and late_batched < late_fifo / 3
    # and the client sees tokens in bursts: several tokens of a stream leave at the same instant
    t = batched[0].token_times
    assert len(set(t)) < len(t) / 2
    # idle (one light stream) each token is its own chunk: late by its step's tokens plus one chunk, no more
    one = [Request(0, 0.0, 64, 40)]
    base, idle = _run("qwen3-1.7b", one), _run("qwen3-1.7b", one, stream_tok_s=20e-6, stream_chunk_s=180e-6)
    shift = [y - x for x, y in zip(base[0].token_times, idle[0].token_times, strict=True)]
    assert min(shift) > 0.0 and max(shift) <= 20e-6 + 180e-6 + 1e-9
    assert len(set(idle[0].token_times)) == len(idle[0].token_times)


def test_prompt_lead_cpu_holds_the_decodes_for_the_launch_and_carries_the_rest() -> None:
    """`prompt_lead_cpu`: a prompt step's decodes' tokens go out after its launch (`prompt_cpu_step_s`) or their own
    decode step, whichever is longer; the rest of its GPU work goes to the next step, whose end brings the first token.
    On 1.7B (prefill shorter than the launch) the decode waits the launch once and nothing is carried; on 32B (prefill
    longer) it waits the launch, then the rest: the two intervals add up to the step without the term plus one decode
    step. `prompt_defer` no longer applies to prompt steps."""
    launch = 0.03
    kw = {**PLAIN, "prompt_lead_cpu": 1, "prompt_cpu_step_s": launch}
    for shape in ("qwen3-1.7b", "qwen3-32b"):
        plain = _run(shape, PROMPT, **PLAIN)
        held = _run(shape, PROMPT, **kw)
        g0, g1 = _gaps(plain[0]), _gaps(held[0])
        decode = sorted(g0)[len(g0) // 2]
        prefill = max(g0)  # the plain run's prompt step (its decode's token waits for all of it)
        # the held run's: the first long interval after the prompt arrived (the decode's own prompt step, at 0 s, was
        # held too, so the indices differ)
        t = held[0].token_times
        i = min(k for k in range(len(g1)) if t[k] > PROMPT[1].arrival_s and g1[k] > 1.2 * decode)
        assert abs(g1[i] - max(launch, decode)) < 2e-4, (shape, g1[i])
        if prefill > launch:  # the rest of the GPU work comes with the next step
            assert abs(g1[i + 1] - (prefill - launch + decode)) < 5e-4, (shape, g1[i + 1], prefill)
        else:  # the launch covers the prefill: nothing carried
            assert abs(g1[i + 1] - decode) < 2e-4, (shape, g1[i + 1])
        assert held[1].token_times[0] == held[0].token_times[i + 2]  # the first token with the next step's tokens
        assert _run(shape, PROMPT, **{**kw, "prompt_defer": 0.3}) == held
    assert _run("qwen3-1.7b", PROMPT, **PLAIN, prompt_lead_cpu=0) == _run("qwen3-1.7b", PROMPT, **PLAIN)


def test_prompt_cpu_layer_s_scales_the_launch_with_the_models_layers() -> None:
    """`prompt_cpu_layer_s`: the launch's mean is prompt_cpu_step_s + layers x this, so a 28-layer 1.7B and a 64-layer
    32B get the launch of that many layers, and the same total as a flat `prompt_cpu_step_s` gives the same records."""
    from tuner.sim.catalog import get_shape

    step, per_layer = 0.014, 0.0006
    for shape in ("qwen3-1.7b", "qwen3-32b"):
        layers = get_shape(shape).layers
        split = _run(shape, PROMPT, **PLAIN, prompt_lead_cpu=1, prompt_cpu_step_s=step, prompt_cpu_layer_s=per_layer)
        flat = _run(shape, PROMPT, **PLAIN, prompt_lead_cpu=1, prompt_cpu_step_s=step + layers * per_layer)
        assert split == flat, shape
        g = _gaps(split[0])
        t = split[0].token_times
        i = min(k for k in range(len(g)) if t[k] > PROMPT[1].arrival_s and g[k] > 2 * sorted(g)[len(g) // 2])
        assert abs(g[i] - (step + layers * per_layer)) < 2e-4, (shape, g[i])
    assert _run("qwen3-8b", PROMPT, **PLAIN, prompt_lead_cpu=1, prompt_cpu_step_s=step,
                prompt_cpu_layer_s=per_layer) != _run("qwen3-8b", PROMPT, **PLAIN, prompt_lead_cpu=1,
                                                      prompt_cpu_step_s=step)


def test_prompt_launch_serial_makes_the_gpu_wait_for_the_launch() -> None:
    """`prompt_launch_serial` 1: the GPU starts the prompt step only after its launch, so the decodes' token after the
    launch is followed by the whole prompt step (not what is left of it after the launch) plus a decode step; 0 is
    the overlapping launch of `prompt_lead_cpu` alone."""
    launch = 0.03
    kw = {**PLAIN, "prompt_lead_cpu": 1, "prompt_cpu_step_s": launch}
    plain = _run("qwen3-32b", PROMPT, **PLAIN)
    g0 = _gaps(plain[0])
    decode, prefill = sorted(g0)[len(g0) // 2], max(g0)
    held = _run("qwen3-32b", PROMPT, **kw, prompt_launch_serial=1.0)
    g1, t = _gaps(held[0]), held[0].token_times
    i = min(k for k in range(len(g1)) if t[k] > PROMPT[1].arrival_s and g1[k] > 1.2 * decode)
    assert abs(g1[i] - launch) < 2e-4, g1[i]
    assert abs(g1[i + 1] - (prefill + decode)) < 5e-4, (g1[i + 1], prefill, decode)
    assert _run("qwen3-32b", PROMPT, **kw, prompt_launch_serial=0.0) == _run("qwen3-32b", PROMPT, **kw)
