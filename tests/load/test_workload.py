"""Workloads: profiles, length distributions, arrivals, clipping, prefixes, traces, validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tuner.common.errors import SpecError
from tuner.load.lengths import sample
from tuner.load.workload import PROFILES, classes_for, generate, native_rate, validate_workload
from tuner.spec.load import validate
from tuner.spec.workload import Workload


def wl(**kw: object) -> Workload:
    return validate(Workload, kw, "test")


def test_profiles_match_the_seeds() -> None:
    (static,) = PROFILES["static"]
    assert (static.input.value, static.output.value) == (2048, 512)  # type: ignore[union-attr]
    means = {c.name: c.input.mean for c in PROFILES["dynamic"]}  # type: ignore[union-attr]
    assert means == {"customer_service": 320, "education": 4200, "code_completion": 1024}
    mixed = {c.name: c.weight for c in PROFILES["mixed"]}
    total = sum(mixed.values())
    assert mixed["abnormal"] / total == pytest.approx(0.10)
    assert [mixed[k] for k in ("customer_service", "education", "code_completion")] == [3, 5, 2]


def test_mixed_profile_shares_and_abnormal_lengths() -> None:
    reqs = generate(wl(profile="mixed", warmup_requests=0), n=20000, rate=5.0, seed=3, max_model_len=8192)
    names = [r.cls for r in reqs]
    share = {k: names.count(k) / len(names) for k in set(names)}
    assert share["abnormal"] == pytest.approx(0.10, abs=0.01)
    assert share["education"] == pytest.approx(0.45, abs=0.015)
    assert all(r.input_len > 16384 for r in reqs if r.cls == "abnormal")  # kept long on purpose
    assert all(r.input_len + r.output_len <= 8192 for r in reqs if r.cls != "abnormal")
    edu = np.array([r.input_len for r in reqs if r.cls == "education"])
    assert 3900 < edu.mean() < 4300  # clipping at 8192 - output pulls the mean down a little


def test_length_distributions() -> None:
    rng = np.random.default_rng(0)
    d = wl(classes=[
        {"name": "n", "weight": 1, "input": {"dist": "normal", "mean": 320, "std": 120, "min": 16, "max": 680},
         "output": {"dist": "lognormal", "median": 100, "sigma": 0.5}},
        {"name": "u", "weight": 1, "input": {"dist": "uniform", "low": 5, "high": 9},
         "output": {"dist": "empirical", "values": [1, 50], "weights": [3, 1]}},
    ]).classes
    assert d is not None
    x = sample(d[0].input, 50000, rng)
    assert x.min() >= 16 and x.max() <= 680 and abs(x.mean() - 320) < 3 and abs(x.std() - 120) < 4
    y = sample(d[0].output, 50000, rng)
    assert abs(np.median(y) - 100) <= 2
    u = sample(d[1].input, 10000, rng)
    assert set(np.unique(u)) == {5, 6, 7, 8, 9}
    e = sample(d[1].output, 40000, rng)
    assert set(np.unique(e)) == {1, 50} and (e == 1).mean() == pytest.approx(0.75, abs=0.01)


def test_reproducible_and_same_lengths_at_every_rate() -> None:
    w = wl(profile="dynamic", warmup_requests=4)
    a = generate(w, n=500, rate=2.0, seed=7)
    b = generate(w, n=500, rate=2.0, seed=7)
    c = generate(w, n=500, rate=8.0, seed=7)
    d = generate(w, n=500, rate=2.0, seed=8)
    assert a == b
    assert [(r.input_len, r.output_len, r.cls) for r in a] == [(r.input_len, r.output_len, r.cls) for r in c]
    assert [r.arrival_s / 4 for r in a] == pytest.approx([r.arrival_s for r in c])
    assert [r.input_len for r in a] != [r.input_len for r in d]
    assert [r.warmup for r in a[:5]] == [True] * 4 + [False]
    assert all(r.arrival_s == 0 for r in a[:4]) and a[4].arrival_s == 0 and a[5].arrival_s > 0


@pytest.mark.parametrize(("process", "burstiness", "cv"), [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0),
                                                           ("constant", 1.0, 0.0)])
def test_arrival_processes(process: str, burstiness: float, cv: float) -> None:
    w = wl(profile="static", warmup_requests=0, arrivals={"process": process, "burstiness": burstiness})
    reqs = generate(w, n=20000, rate=10.0, seed=1)
    gaps = np.diff([r.arrival_s for r in reqs])
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, abs=0.08)


def test_closed_loop_has_no_arrival_times() -> None:
    for w, rate in ((wl(profile="static"), None), (wl(profile="static", arrivals={"process": "concurrency"}), 5.0)):
        assert all(r.arrival_s == 0 for r in generate(w, n=50, rate=rate, seed=0))


def test_shared_prefix_groups() -> None:
    w = wl(classes=[{"name": "chat", "weight": 1, "input": {"dist": "fixed", "value": 300},
                     "output": {"dist": "fixed", "value": 8}, "shared_prefix": {"length": 200, "groups": 3}},
                    {"name": "plain", "weight": 1, "input": {"dist": "fixed", "value": 50},
                     "output": {"dist": "fixed", "value": 8}}])
    reqs = generate(w, n=300, rate=None, seed=0)
    chat = [r for r in reqs if r.cls == "chat"]
    assert {r.prefix_group for r in chat} == {0, 1, 2} and all(r.prefix_len == 200 for r in chat)
    assert all(r.prefix_group == -1 and r.prefix_len == 0 for r in reqs if r.cls == "plain")


def write_trace(path: Path, rows: list[dict]) -> None:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_trace_replay(tmp_path: Path, suffix: str) -> None:
    rows = [{"arrival_s": 2.0 + i * 0.5, "input_len": 100 + i, "output_len": 10 + i, "cls": "x" if i % 2 else "y"}
            for i in range(10)]
    write_trace(tmp_path / f"t{suffix}", rows)
    w = wl(trace={"path": f"t{suffix}", "time_scale": 2.0}, warmup_requests=2)
    validate_workload(w, tmp_path)
    assert native_rate(w, tmp_path) == pytest.approx(4.0)
    reqs = generate(w, n=15, rate=4.0, seed=0, base_dir=tmp_path)
    measured = [r for r in reqs if not r.warmup]
    assert [r.input_len for r in measured[:10]] == [100 + i for i in range(10)]
    assert measured[10].input_len == 100  # wraps around
    assert [r.arrival_s for r in measured[:3]] == pytest.approx([0.0, 0.25, 0.5])
    assert measured[10].arrival_s > measured[9].arrival_s
    assert {c.name for c in classes_for(w, tmp_path)} == {"x", "y"}


def test_bad_traces_are_spec_errors(tmp_path: Path) -> None:
    def check(name: str, content: str | None, match: str) -> None:
        if content is not None:
            (tmp_path / name).write_text(content)
        with pytest.raises(SpecError, match=match):
            validate_workload(wl(trace={"path": name}), tmp_path)

    check("missing.parquet", None, "not found")
    check("corrupt.parquet", "not parquet at all", "cannot read Parquet")
    check("bad.jsonl", '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{oops\n', "bad JSON")
    check("cols.jsonl", '{"arrival_s": 0, "input_len": 5}\n', "lacks column")
    check("neg.jsonl", '{"arrival_s": 0, "input_len": 0, "output_len": 3}\n', "lengths >= 1")
    check("trace.tsv", "a\tb\n", "unknown trace format")


def test_bad_classes_are_spec_errors() -> None:
    w = wl(classes=[{"name": "a", "weight": 1, "input": {"dist": "fixed", "value": 1},
                     "output": {"dist": "lognormal", "median": 5, "sigma": 1, "min": 10, "max": 3}}])
    with pytest.raises(SpecError, match="min <= max"):
        validate_workload(w)
    dup = {"name": "a", "weight": 1, "input": {"dist": "fixed", "value": 1}, "output": {"dist": "fixed", "value": 1}}
    with pytest.raises(SpecError, match="twice"):
        validate_workload(wl(classes=[dup, dup]))
