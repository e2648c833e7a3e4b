"""`python -m tuner.bench` under `vllm bench serve`'s flag names, writing vLLM's result JSON (real server)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).parents[2]
SHAREGPT = Path(__file__).parent / "data" / "sharegpt_sample.json"
# Keys of a real `vllm bench serve --save-result` file (vLLM 0.26, benchmarks/reference/h200-vllm-0.26.0).
VLLM_FILE = ROOT / "benchmarks" / "reference" / "h200-vllm-0.26.0" / "bench_default.json"


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.bench", *args], capture_output=True, text=True, timeout=180,
                          cwd=ROOT)


def test_vllm_command_line_and_result_json(fake_server: Callable[..., Any], tmp_path: Path) -> None:
    srv = fake_server("--ttft-ms", "5", "--itl-ms", "2")
    p = bench("--base-url", srv.url, "--model", "fake", "--dataset-name", "sharegpt", "--dataset-path", str(SHAREGPT),
              "--request-rate", "30", "--num-prompts", "40", "--max-concurrency", "16", "--goodput", "ttft:1000",
              "tpot:50", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
              "--save-result", "--save-detailed", "--result-dir", str(tmp_path), "--result-filename", "r.json",
              "--output", str(tmp_path / "o"), "--ignore-eos", "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "r.json").read_text())
    theirs = set(json.loads(VLLM_FILE.read_text()))
    missing = {k for k in theirs if k not in res} - {"rtfx"}
    assert not missing, missing  # a vLLM user's scripts find every key they know
    assert res["num_prompts"] == 40 and res["completed"] == 40 and res["request_rate"] == 30
    assert res["max_concurrency"] == 16 and 1 <= res["max_concurrent_requests"] <= 40
    assert 0 < res["max_output_tokens_per_s"] <= res["total_output_tokens"]
    # recompute from the per-request records: same definitions as vLLM's
    table = pq.read_table(tmp_path / "o" / "records.parquet").to_pylist()
    rows = [r for r in table if not r["warmup"]]
    ttft = np.array([(r["first_token_s"] - r["sent_s"]) * 1e3 for r in rows])
    assert res["p90_ttft_ms"] == pytest.approx(np.percentile(ttft, 90))
    assert res["median_ttft_ms"] == pytest.approx(np.median(ttft)) and res["mean_e2el_ms"] > res["mean_ttft_ms"]
    assert res["request_goodput"] == pytest.approx(res["request_throughput"])  # 5 ms TTFT, 2 ms TPOT: all good
    assert res["total_output_tokens"] == sum(r["output_tokens"] for r in rows)
    assert sorted(res["input_lens"]) == sorted(r["input_len"] for r in rows) and len(res["itls"]) == 40
    prompts = {len(t["value"].split()) for c in json.loads(SHAREGPT.read_text()) for t in c["conversations"]}
    assert set(res["input_lens"]) <= prompts  # the requests are the dataset's
    assert json.loads((tmp_path / "o" / "result.json").read_text()) == res | {"date": json.loads(
        (tmp_path / "o" / "result.json").read_text())["date"]}


def test_goodput_slo_is_per_request(fake_server: Callable[..., Any], tmp_path: Path) -> None:
    srv = fake_server("--ttft-ms", "30", "--itl-ms", "1")
    p = bench("--base-url", srv.url, "--model", "fake", "--dataset-name", "random", "--random-input-len", "32",
              "--random-output-len", "8", "--request-rate", "inf", "--num-prompts", "20", "--goodput", "ttft:5",
              "--output", str(tmp_path), "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "result.json").read_text())
    assert res["request_goodput"] == 0 and res["completed"] == 20 and res["request_rate"] == "inf"
    assert res["p99_ttft_ms"] >= 30 and "p99_e2el_ms" not in res  # vLLM's default metrics: ttft,tpot,itl


@pytest.mark.parametrize(("args", "needle"), [
    (["--dataset-name", "sharegpt"], "needs --dataset-path"),
    (["--dataset-path", "x.json"], "without --dataset-name"),
    (["--goodput", "itl:5"], "unknown goodput metric"),
    (["--percentile-metrics", "ttft,e2e"], "unknown metric"),
    (["--metric-percentiles", "abc"], "cannot read percentiles"),
    (["--endpoint", "/v1/embeddings"], "unsupported endpoint"),
])
def test_bad_vllm_flags_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tuner.bench.cli import main

    assert main(["--base-url", "http://127.0.0.1:9", "--model", "m", "--rate", "1", *args]) == 2
    assert needle in capsys.readouterr().out
