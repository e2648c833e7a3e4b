"""A ShareGPT-format file and a published trace (Azure CSV) each drive a whole study (sim engine, real Ray)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, small_study

pytestmark = pytest.mark.slow
DATA = Path(__file__).parents[1] / "load" / "data"


def _prompt_lengths(name: str) -> set[int]:
    """Every prompt length the source file can give: words of ShareGPT turns, ContextTokens of the trace."""
    if name == "sharegpt":
        convs = json.loads((DATA / "sharegpt_sample.json").read_text())
        return {len(t["value"].split()) for c in convs for t in c["conversations"]}
    with (DATA / "azure_trace_sample.csv").open() as f:
        return {int(r["ContextTokens"]) for r in csv.DictReader(f)}


@pytest.mark.parametrize(("name", "workload"), [
    ("sharegpt", {"dataset": {"path": str(DATA / "sharegpt_sample.json")}}),
    ("azure", {"trace": {"path": str(DATA / "azure_trace_sample.csv")}}),
])
def test_study_from_real_requests(tmp_path: Path, name: str, workload: dict) -> None:
    out = tmp_path / "out"
    study = small_study(tmp_path, name=name, workload={**workload, "warmup_requests": 2},
                        budget={"trials": 2, "max_concurrent": 2}, promotion={"enabled": False})
    proc = run_cli("--study", str(study), "--output", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) == 2 and any(r["outcome"] == "ok" for r in rows), [r["reason"] for r in rows]
    records = [Path(r["records_path"]) for r in rows if r["records_path"]]
    assert records and records[0].exists(), "per-request records written"
    lens = set(pq.read_table(records[0]).column("input_len").to_pylist())
    assert len(lens) > 5 and lens <= _prompt_lengths(name)  # the requests sent are the file's
