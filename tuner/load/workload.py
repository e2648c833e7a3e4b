"""Turn a workload (named profile, class mix or trace) into the `Request`s of one load run.

Reproducible: the same seed gives the same classes and lengths at every rate, and the same arrival
pattern scaled by the rate (so the load points of a capacity search differ only in load).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tuner.common.errors import SpecError
from tuner.load import datasets, lengths
from tuner.load.arrivals import arrival_times
from tuner.load.profiles import DEFAULT_CONCURRENCY, PROFILES
from tuner.load.records import Request
from tuner.load.trace import TraceRows, read_trace, resolve
from tuner.spec.workload import Empirical, LogNormal, RequestClass, Workload

__all__ = ["DEFAULT_CONCURRENCY", "PROFILES", "abnormal_classes", "classes_for", "generate", "native_rate",
           "validate_workload"]


def classes_for(workload: Workload, base_dir: Path | None = None) -> list[RequestClass]:
    """The request classes of a workload; a trace gives one empirical class per `cls` value."""
    if workload.profile is not None:
        return list(PROFILES[workload.profile])
    if workload.classes is not None:
        return list(workload.classes)
    if workload.dataset is not None:
        pairs = _dataset(workload, base_dir)
        return [RequestClass(name="dataset", weight=1.0,
                             input=Empirical(dist="empirical", values=pairs.input_len.tolist()),
                             output=Empirical(dist="empirical", values=pairs.output_len.tolist()))]
    assert workload.trace is not None  # the spec model guarantees exactly one source
    rows = _trace(workload, base_dir)
    out: list[RequestClass] = []
    for name in dict.fromkeys(rows.cls):
        idx = [i for i, c in enumerate(rows.cls) if c == name]
        out.append(RequestClass(
            name=name, weight=float(len(idx)),
            input=Empirical(dist="empirical", values=[int(rows.input_len[i]) for i in idx]),
            output=Empirical(dist="empirical", values=[int(rows.output_len[i]) for i in idx]),
        ))
    return out


def validate_workload(workload: Workload, base_dir: Path | None = None) -> None:
    """Everything checkable before an engine starts: the trace file, distribution bounds, class names."""
    if workload.trace is not None:
        _trace(workload, base_dir)
        return
    if workload.dataset is not None:
        _dataset(workload, base_dir)
        return
    classes = classes_for(workload, base_dir)
    names = [c.name for c in classes]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"class name(s) given twice: {dup}", "workload.classes", "give each class its own name")
    for i, c in enumerate(classes):
        for part in ("input", "output"):
            dist = getattr(c, part)
            if isinstance(dist, LogNormal) and dist.max is not None and dist.min > dist.max:
                raise SpecError(
                    f"min <= max must hold, but got min={dist.min} max={dist.max}",
                    f"workload.classes[{i}].{part}", "lower min or raise max",
                )
            if isinstance(dist, Empirical) and dist.weights is not None and (
                any(w < 0 for w in dist.weights) or sum(dist.weights) <= 0
            ):
                raise SpecError("empirical weights must be >= 0 and not all zero",
                                f"workload.classes[{i}].{part}.weights", "give non-negative weights")
            if isinstance(dist, Empirical) and any(v < 1 for v in dist.values):
                raise SpecError("empirical lengths must be >= 1", f"workload.classes[{i}].{part}.values",
                                "give positive token counts")


def abnormal_classes(workload: Workload, base_dir: Path | None = None) -> set[str]:
    """Names of the classes counted apart from the normal traffic (`abnormal: true`)."""
    if workload.trace is not None:
        return set()
    return {c.name for c in classes_for(workload, base_dir) if c.abnormal}


def native_rate(workload: Workload, base_dir: Path | None = None) -> float | None:
    """A trace's own request rate times its `time_scale` (None for class mixes)."""
    if workload.trace is None:
        return None
    return _trace(workload, base_dir).rate * workload.trace.time_scale


def generate(
    workload: Workload,
    *,
    n: int,
    rate: float | None,
    seed: int,
    max_model_len: int | None = None,
    base_dir: Path | None = None,
) -> list[Request]:
    """`workload.warmup_requests` warm-up requests (arrival 0, warmup=True), then `n` measured ones.

    `rate` is req/s of the arrival process; None (or inf) makes a closed-loop run (all arrivals 0).
    With `max_model_len`, input lengths are cut so input + output fits, except for abnormal classes,
    which stay long on purpose (the engine must cope; metrics count them separately).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    w = workload.warmup_requests
    ss = np.random.SeedSequence(seed)
    arr_seed, cls_seed, len_seed, pre_seed = ss.spawn(4)
    if workload.trace is not None:
        inp, out, names, abnormal, arrivals = _from_trace(workload, base_dir, w, n, rate)
        groups = np.full(w + n, -1)
        plen = np.zeros(w + n, dtype=np.int64)
    elif workload.dataset is not None:  # (prompt, reply) pairs kept together, as vLLM samples them
        inp, out = datasets.sample(_dataset(workload, base_dir), w + n, np.random.default_rng(len_seed))
        names, abnormal = ["dataset"] * (w + n), np.zeros(w + n, dtype=bool)
        groups, plen = np.full(w + n, -1), np.zeros(w + n, dtype=np.int64)
        arrivals = np.concatenate([np.zeros(w), arrival_times(workload.arrivals, n, rate, np.random.default_rng(arr_seed))])
    else:
        classes = classes_for(workload, base_dir)
        inp, out, names, abnormal, groups, plen = _from_classes(classes, w + n, cls_seed, len_seed, pre_seed)
        arrivals = np.concatenate([np.zeros(w), arrival_times(workload.arrivals, n, rate, np.random.default_rng(arr_seed))])
    if workload.arrivals.process == "concurrency" or rate is None or math.isinf(rate):
        arrivals = np.zeros(w + n)
    if max_model_len is not None:
        keep = ~abnormal
        out = np.where(keep, np.minimum(out, max_model_len - 1), out)
        inp = np.where(keep, np.maximum(np.minimum(inp, max_model_len - out), 1), inp)
    plen = np.minimum(plen, inp)
    return [
        Request(
            id=i, arrival_s=float(arrivals[i]), input_len=int(inp[i]), output_len=int(out[i]), cls=names[i],
            prefix_group=int(groups[i]), prefix_len=int(plen[i]) if groups[i] >= 0 else 0, warmup=i < w,
        )
        for i in range(w + n)
    ]


def _from_classes(
    classes: list[RequestClass], total: int, cls_seed: np.random.SeedSequence,
    len_seed: np.random.SeedSequence, pre_seed: np.random.SeedSequence,
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray]:
    weights = np.asarray([c.weight for c in classes], dtype=float)
    which = np.random.default_rng(cls_seed).choice(len(classes), size=total, p=weights / weights.sum())
    inp = np.zeros(total, dtype=np.int64)
    out = np.zeros(total, dtype=np.int64)
    groups = np.full(total, -1, dtype=np.int64)
    plen = np.zeros(total, dtype=np.int64)
    pre_rng = np.random.default_rng(pre_seed)
    base = 0
    # One child seed per class: adding a class does not change the lengths drawn for the others.
    for k, (c, s) in enumerate(zip(classes, len_seed.spawn(len(classes)), strict=True)):
        idx = np.flatnonzero(which == k)
        rng = np.random.default_rng(s)
        inp[idx] = lengths.sample(c.input, len(idx), rng)
        out[idx] = lengths.sample(c.output, len(idx), rng)
        if c.shared_prefix is not None and c.shared_prefix.length > 0:
            groups[idx] = base + pre_rng.integers(0, c.shared_prefix.groups, len(idx))
            plen[idx] = c.shared_prefix.length
            base += c.shared_prefix.groups
    names = [classes[k].name for k in which]
    abnormal = np.asarray([classes[k].abnormal for k in which], dtype=bool)
    return inp, out, names, abnormal, groups, plen


def _from_trace(
    workload: Workload, base_dir: Path | None, w: int, n: int, rate: float | None
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]:
    rows = _trace(workload, base_dir)
    m = len(rows)
    idx = np.concatenate([np.arange(w) % m, np.arange(n) % m])
    # Wrapping around a short trace continues its timeline one mean gap after its last row.
    span = float(rows.arrival_s[-1]) + (float(rows.arrival_s[-1]) / (m - 1) if m > 1 else 0.0)
    laps = np.arange(n) // m
    measured = rows.arrival_s[np.arange(n) % m] + laps * span
    if rate is not None and not math.isinf(rate) and rows.rate != float("inf"):
        measured = measured * (rows.rate / rate)
    arrivals = np.concatenate([np.zeros(w), measured])
    names = [rows.cls[i] for i in idx]
    return rows.input_len[idx], rows.output_len[idx], names, np.zeros(w + n, dtype=bool), arrivals


def _trace(workload: Workload, base_dir: Path | None) -> TraceRows:
    assert workload.trace is not None
    return read_trace(resolve(workload.trace.path, base_dir), fmt=workload.trace.format)


def _dataset(workload: Workload, base_dir: Path | None) -> datasets.LengthPairs:
    assert workload.dataset is not None
    return datasets.read_dataset(workload.dataset, resolve(workload.dataset.path, base_dir))
