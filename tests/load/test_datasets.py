"""Workloads from real datasets and published traces on disk: the sample files in tests/load/data."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tuner.common.errors import SpecError
from tuner.load.trace import read_trace
from tuner.load.workload import generate, native_rate, validate_workload
from tuner.spec.load import validate
from tuner.spec.workload import Workload

DATA = Path(__file__).parent / "data"
SHAREGPT = DATA / "sharegpt_sample.json"


def wl(**kw: object) -> Workload:
    return validate(Workload, kw, "test")


def expected_pairs(convs: list[dict]) -> list[tuple[int, int]]:
    """vLLM's ShareGPT rule restated on the file: first human turn and the reply after it, both >= 4 words."""
    out = []
    for c in convs:
        t = c["conversations"]
        for a, b in zip(t, t[1:], strict=False):
            if a["from"] == "human" and b["from"] == "gpt":
                n_in, n_out = len(a["value"].split()), len(b["value"].split())
                if n_in >= 4 and n_out >= 4:
                    out.append((n_in, n_out))
                break
    return out


def test_sharegpt_json_keeps_prompt_and_reply_together() -> None:
    convs = json.loads(SHAREGPT.read_text())
    want = expected_pairs(convs)
    assert 40 <= len(want) < len(convs)  # the sample has rows the filter drops
    reqs = generate(wl(dataset={"path": str(SHAREGPT)}, warmup_requests=2), n=200, rate=4.0, seed=1)
    measured = [r for r in reqs if not r.warmup]
    pairs = {(r.input_len, r.output_len) for r in measured}
    assert pairs <= set(want) and len(pairs) == len(set(want))  # 200 draws wrap the ~46 pairs
    assert all(r.cls == "dataset" for r in reqs)
    gaps = np.diff([r.arrival_s for r in measured])
    assert np.mean(gaps) == pytest.approx(0.25, rel=0.25)  # Poisson at 4 req/s
    again = generate(wl(dataset={"path": str(SHAREGPT)}, warmup_requests=2), n=200, rate=4.0, seed=1)
    assert [(r.input_len, r.output_len) for r in again] == [(r.input_len, r.output_len) for r in reqs]


def test_sharegpt_jsonl_and_fixed_output_len() -> None:
    path = DATA / "sharegpt_sample.jsonl"
    want = expected_pairs([json.loads(line) for line in path.read_text().splitlines()])
    reqs = generate(wl(dataset={"path": str(path)}, warmup_requests=0), n=len(want), rate=None, seed=0)
    assert sorted((r.input_len, r.output_len) for r in reqs) == sorted(want)  # n == rows: each row once
    fixed = generate(wl(dataset={"path": str(path), "output_len": 64}, warmup_requests=0), n=10, rate=None, seed=0)
    assert {r.output_len for r in fixed} == {64}


def _write_save_to_disk(folder: Path, rows: list[dict]) -> None:
    """The layout `datasets.Dataset.save_to_disk` writes: Arrow stream file(s) listed in state.json."""
    folder.mkdir()
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                                                   "_fingerprint": "x", "_split": "train"}))
    (folder / "dataset_info.json").write_text("{}")


def test_hf_save_to_disk_folder_with_messages(tmp_path: Path) -> None:
    rows = [{"messages": [{"role": "system", "content": "be nice"},
                          {"role": "user", "content": " ".join(["w"] * (10 + i))},
                          {"role": "assistant", "content": " ".join(["v"] * (20 + 2 * i))}]} for i in range(12)]
    _write_save_to_disk(tmp_path / "ds", rows)
    reqs = generate(wl(dataset={"path": str(tmp_path / "ds")}, warmup_requests=0), n=12, rate=None, seed=0)
    assert sorted((r.input_len, r.output_len) for r in reqs) == [(10 + i, 20 + 2 * i) for i in range(12)]


def test_hf_parquet_with_named_text_columns(tmp_path: Path) -> None:
    rows = [{"instruction": " ".join(["q"] * (5 + i)), "response": " ".join(["a"] * (7 + i))} for i in range(6)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    spec = {"path": str(tmp_path / "train.parquet"), "prompt_field": "instruction", "output_field": "response"}
    reqs = generate(wl(dataset=spec, warmup_requests=0), n=6, rate=None, seed=0)
    assert sorted((r.input_len, r.output_len) for r in reqs) == [(5 + i, 7 + i) for i in range(6)]
    with pytest.raises(SpecError, match="no usable"):  # without the column names the rows have no pair
        validate_workload(wl(dataset={"path": str(tmp_path / "train.parquet")}))


def test_azure_trace_csv_replays_its_own_timeline() -> None:
    path = DATA / "azure_trace_sample.csv"
    with path.open() as f:
        raw = list(csv.DictReader(f))
    times = [datetime.fromisoformat(r["TIMESTAMP"][:26]) for r in raw]
    rows = read_trace(path)
    assert rows.arrival_s[-1] == pytest.approx((times[-1] - times[0]).total_seconds(), abs=1e-6)
    assert rows.input_len.tolist() == [int(r["ContextTokens"]) for r in raw]
    assert rows.output_len.tolist() == [int(r["GeneratedTokens"]) for r in raw]
    w = wl(trace={"path": str(path)}, warmup_requests=0)
    assert native_rate(w) == pytest.approx((len(raw) - 1) / rows.arrival_s[-1])
    reqs = generate(w, n=len(raw), rate=native_rate(w), seed=0)
    assert [r.arrival_s for r in reqs] == pytest.approx(rows.arrival_s.tolist())


def test_mooncake_trace_jsonl() -> None:
    path = DATA / "mooncake_trace_sample.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    rows = read_trace(path)
    assert rows.arrival_s.tolist() == pytest.approx([(r["timestamp"] - raw[0]["timestamp"]) / 1000 for r in raw])
    assert rows.input_len.tolist() == [r["input_length"] for r in raw]
    fast = wl(trace={"path": str(path), "format": "mooncake", "time_scale": 2.0})
    assert native_rate(fast) == pytest.approx(2 * rows.rate)


@pytest.mark.parametrize(("make", "fmt", "match"), [
    (lambda p: p.write_text("time,in,out\n1,2,3\n"), "auto", "lacks column"),
    (lambda p: p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n"), "auto", "bad row"),
    (lambda p: p.write_text('{"timestamp": 1, "input_length": 5}\n'), "mooncake", "bad Mooncake"),
])
def test_bad_trace_files_are_clear_errors(tmp_path: Path, make, fmt: str, match: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / ("t.csv" if fmt == "auto" else "t.jsonl")
    make(path)
    with pytest.raises(SpecError, match=match):
        read_trace(path, fmt=fmt)


def test_bad_dataset_inputs(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="dataset not found"):
        validate_workload(wl(dataset={"path": str(tmp_path / "nope.json")}))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(SpecError, match="unknown dataset format"):
        validate_workload(wl(dataset={"path": str(tmp_path / "x.txt")}))
    with pytest.raises(SpecError, match="exactly one of"):
        wl(dataset={"path": str(SHAREGPT)}, profile="dynamic")


@pytest.mark.parametrize("name", ["sharegpt_sample.json", "sharegpt_sample.jsonl"])
def test_a_byte_order_mark_is_not_part_of_the_json(name: str, tmp_path: Path) -> None:
    """Files saved by Windows editors start with a UTF-8 BOM; they read as the same rows (they were refused)."""
    plain = DATA / name
    bom = tmp_path / name
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    a = generate(wl(dataset={"path": str(plain)}, warmup_requests=0), n=50, rate=4.0, seed=1)
    b = generate(wl(dataset={"path": str(bom)}, warmup_requests=0), n=50, rate=4.0, seed=1)
    assert [(r.input_len, r.output_len) for r in a] == [(r.input_len, r.output_len) for r in b]


def test_list_cells_in_a_parquet_trace_are_a_clear_error(tmp_path: Path) -> None:
    """A column of one-element lists converts to a 2-D array and used to fail only when requests were built
    (TypeError in tuner.bench); the reader itself must refuse it."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"arrival_s": [0.0, 1.0], "input_len": [[1], [2]], "output_len": [5, 5]}), path)
    with pytest.raises(SpecError, match="input_len holds lists"):
        read_trace(path)


@pytest.mark.parametrize(("name", "use"), [("deep.json", "dataset"), ("deep.jsonl", "dataset"),
                                           ("deep.jsonl", "trace")])
def test_json_nested_too_deeply_is_a_clear_error(tmp_path: Path, name: str, use: str) -> None:
    """json.loads raises RecursionError, not JSONDecodeError, on deep nesting: it escaped the readers."""
    path = tmp_path / name
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(SpecError, match="too deeply"):
        if use == "trace":
            read_trace(path)
        else:
            generate(wl(dataset={"path": str(path)}, warmup_requests=0), n=5, rate=1.0, seed=0)
