"""Small workload and statistics helpers for the simulator tests."""

from __future__ import annotations

import numpy as np

from tuner.load.records import Request, RequestRecord
from tuner.sim import SimulatedEngine


def engine(flavour: str = "vllm", mml: int = 16384, gpu: str = "H200", shape: str = "qwen3-8b", tp: int = 1,
           **args: object) -> SimulatedEngine:
    return SimulatedEngine(flavour=flavour, gpu=gpu, shape=shape, args=args, max_model_len=mml,
                           tensor_parallel_size=tp)


def poisson(n: int, rate: float, inp: int | tuple[int, int] = 2048, out: int | tuple[int, int] = 512,
            seed: int = 0) -> list[Request]:
    """n requests with Poisson arrivals; lengths fixed or uniform in [lo, hi]."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate, n)) if rate > 0 else np.zeros(n)

    def draw(x: int | tuple[int, int]) -> np.ndarray:
        return np.full(n, x) if isinstance(x, int) else rng.integers(x[0], x[1] + 1, n)

    i_len, o_len = draw(inp), draw(out)
    return [Request(k, float(t[k]), int(i_len[k]), int(o_len[k])) for k in range(n)]


def out_tok_s(recs: list[RequestRecord]) -> float:
    ok = [r for r in recs if r.ok]
    span = max(r.done_s for r in ok) - min(r.sent_s for r in recs)  # type: ignore[type-var]
    return sum(r.output_tokens for r in ok) / span


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def ttfts(recs: list[RequestRecord]) -> list[float]:
    return [r.ttft_s for r in recs if r.ok]  # type: ignore[misc]


def itls(recs: list[RequestRecord]) -> list[float]:
    return [b - a for r in recs if r.ok for a, b in zip(r.token_times, r.token_times[1:], strict=False)]
