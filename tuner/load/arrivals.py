"""Arrival processes: when each request of an open-loop run is sent.

Inter-arrival gaps are drawn at unit rate and then divided by the rate, so the same seed gives the
same arrival *pattern* at every load point of a capacity search (only stretched or squeezed).
"""

from __future__ import annotations

import math

import numpy as np

from tuner.spec.workload import Arrivals


def arrival_times(arrivals: Arrivals, n: int, rate: float | None, rng: np.random.Generator) -> np.ndarray:
    """Offsets in seconds of `n` arrivals; all zero for closed-loop runs (no rate, or `concurrency`).

    - poisson: exponential gaps, mean 1/rate.
    - gamma: gamma gaps with shape `burstiness` and mean 1/rate (1 = Poisson, < 1 burstier),
      the same definition as `vllm bench serve --burstiness`.
    - constant: evenly spaced, 1/rate apart.
    The first request arrives at 0.
    """
    if n <= 0:
        return np.zeros(0)
    if rate is None or math.isinf(rate) or arrivals.process == "concurrency":
        return np.zeros(n)
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if arrivals.process == "constant":
        gaps = np.ones(n)
    elif arrivals.process == "poisson":
        gaps = rng.exponential(1.0, n)
    else:
        k = arrivals.burstiness
        gaps = rng.gamma(k, 1.0 / k, n)
    gaps[0] = 0.0
    return np.cumsum(gaps) / rate
