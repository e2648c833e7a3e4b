"""Draw token lengths from the distributions a workload file can name (tuner.spec.workload)."""

from __future__ import annotations

import numpy as np

from tuner.spec.workload import Empirical, Fixed, LengthDist, LogNormal, Normal, Uniform


def sample(dist: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` integer lengths >= 1 from `dist`; clipped distributions stay within their [min, max]."""
    if isinstance(dist, Fixed):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, Normal):
        return _clip(np.rint(rng.normal(dist.mean, dist.std, n)), dist.min, dist.max)
    if isinstance(dist, LogNormal):
        return _clip(np.rint(dist.median * np.exp(rng.normal(0.0, dist.sigma, n))), dist.min, dist.max)
    if isinstance(dist, Uniform):
        return rng.integers(dist.low, dist.high + 1, n, dtype=np.int64)
    if isinstance(dist, Empirical):
        values = np.asarray(dist.values, dtype=np.int64)
        p = None
        if dist.weights is not None:
            w = np.asarray(dist.weights, dtype=float)
            p = w / w.sum()
        return np.maximum(rng.choice(values, size=n, p=p), 1)
    raise TypeError(f"unknown length distribution {type(dist).__name__}")


def mean(dist: LengthDist) -> float:
    """Nominal mean length (before clipping): used to document profiles and size runs."""
    if isinstance(dist, Fixed):
        return float(dist.value)
    if isinstance(dist, Normal):
        return dist.mean
    if isinstance(dist, LogNormal):
        return float(dist.median * np.exp(dist.sigma**2 / 2))
    if isinstance(dist, Uniform):
        return (dist.low + dist.high) / 2
    w = np.asarray(dist.weights if dist.weights is not None else [1.0] * len(dist.values), dtype=float)
    return float(np.dot(w / w.sum(), dist.values))


def _clip(x: np.ndarray, low: int, high: int | None) -> np.ndarray:
    return np.clip(x, max(low, 1), high if high is not None else None).astype(np.int64)
