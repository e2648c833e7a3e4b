"""Records stream to Parquet in row groups (bounded memory) and read back intact."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tuner.load.metrics import summarize
from tuner.load.records import RequestRecord
from tuner.load.records_io import RecordWriter, read_records, to_records


def make(i: int) -> RequestRecord:
    if i % 7 == 0:
        return RequestRecord(id=i, cls="b", input_len=3, output_len=4, sent_s=i * 0.01, error="timeout")
    t = [i * 0.01 + 0.02 + k * 0.005 for k in range(4)]
    return RequestRecord(id=i, cls="a", input_len=10, output_len=4, sent_s=i * 0.01, first_token_s=t[0],
                         done_s=t[-1], token_times=t, output_tokens=4, warmup=i < 2)


def test_batches_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    records = [make(i) for i in range(1000)]
    with RecordWriter(path, batch_size=128, extra={"load": pa.float64()}) as w:
        for r in records:
            w.write(r, load=2.5)
            assert len(w._rows) < 128  # never more than one batch held in memory
    assert pq.ParquetFile(path).num_row_groups == 8
    table = read_records(path)
    assert table.num_rows == 1000 and set(table.column("load").to_pylist()) == {2.5}
    assert table.column("ttft_ms").to_pylist()[1] == records[1].ttft_s * 1e3  # type: ignore[operator]
    back = to_records(table)
    assert back == records
    assert summarize(back) == summarize(records)
