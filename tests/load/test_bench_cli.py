"""`python -m tuner.bench` as a user runs it: a real process against a real streaming server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.bench", *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])


def test_output_folder_and_table(fake_server: Callable[..., Any], tmp_path: Path) -> None:
    srv = fake_server("--ttft-ms", "5", "--itl-ms", "2")
    out = tmp_path / "run"
    p = bench("--url", srv.url, "--model", "fake", "--workload", "dynamic", "--rate", "40", "--requests", "60",
              "--max-model-len", "2048", "--sla", "p99_ttft_ms<=5000,p99_e2el_ms<=60000", "--output", str(out),
              "--warmup", "3", "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "TTFT p99" in p.stdout and "met" in p.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 60 and summary["failed"] == 0
    for key in ("p99_ttft_ms", "p50_tpot_ms", "p99.9_itl_ms", "max_e2el_ms", "jitter_ttft", "request_goodput",
                "output_throughput", "class.education.p99_ttft_ms"):
        assert key in summary, key
    assert summary["p50_ttft_ms"] >= 5.0 and summary["request_goodput"] == summary["request_throughput"]
    # the client's own error bar, and its budget: 5% of the tightest latency term (5000 ms)
    assert summary["client_error_ms"] >= 0 and summary["client_lag_samples"] > 0
    assert summary["client_error_budget_ms"] == 250 and summary["client_suspect"] in (0.0, 1.0)
    table = pq.read_table(out / "records.parquet")
    assert table.num_rows == 63 and sum(table.column("warmup").to_pylist()) == 3
    assert json.loads((out / "run.json").read_text())["load"] == 40
    assert any(p["kind"] == "metrics" for p in json.loads((out / "probes.json").read_text()))


def test_concurrency_steps_from_a_workload_file(fake_server: Callable[..., Any], tmp_path: Path) -> None:
    srv = fake_server("--ttft-ms", "2", "--itl-ms", "1")
    wl = tmp_path / "wl.yaml"
    wl.write_text("workload:\n  classes:\n    - name: short\n      weight: 1\n"
                  "      input: {dist: uniform, low: 10, high: 40}\n      output: {dist: fixed, value: 8}\n"
                  "  warmup_requests: 0\n")
    p = bench("--url", srv.url, "--model", "fake", "--workload", str(wl), "--concurrency", "1,4",
              "--requests", "20", "--output", str(tmp_path / "o"), "--no-progress")
    assert p.returncode == 0, p.stdout + p.stderr
    points = json.loads((tmp_path / "o" / "summary.json").read_text())["points"]
    assert [pt["load"] for pt in points] == [1, 4] and all(pt["completed"] == 20 for pt in points)
    assert (tmp_path / "o" / "concurrency_4" / "records.parquet").exists()


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tuner.bench.cli import main

    for args, needle in [
        (["--workload", "nope"], "unknown workload"),
        (["--workload", "dynamic", "--rate", "x"], "cannot read"),
        (["--workload", "dynamic"], "no load given"),
        (["--workload", "static", "--sla", "p99_foo<=3"], "unknown SLA term"),
        (["--workload", str(tmp_path / "missing.yaml")], "file not found"),
        (["--workload", "static", "--capacity"], "needs an SLA"),
        (["--workload", "dynamic", "--rate", "nan"], "--rate needs numbers > 0"),
        (["--workload", "dynamic", "--concurrency", "4,nan"], "--concurrency needs whole numbers > 0"),
    ]:
        code = main(["--url", "http://127.0.0.1:9", "--model", "m", *args])
        text = capsys.readouterr().out
        assert code == 2 and needle in " ".join(text.split()), (args, text)


def test_every_request_failing_exits_1(tmp_path: Path) -> None:
    p = bench("--url", "http://127.0.0.1:9", "--model", "m", "--workload", "static", "--concurrency", "2",
              "--requests", "3", "--warmup", "0", "--no-progress")
    assert p.returncode == 1 and "0 ok, 3 failed" in p.stdout


def test_capacity_search_from_the_command(fake_server: Callable[..., Any], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from tuner.bench.cli import main

    srv = fake_server("--ttft-ms", "5", "--itl-ms", "1", "--max-running", "2")  # ~25 ms per request, 2 slots
    code = main(["--url", srv.url, "--model", "fake", "--workload", "static", "--max-model-len", "24",
                 "--capacity", "--low", "4", "--high", "512", "--max-points", "5", "--duration", "1",
                 "--sla", "p99_ttft_ms<=200", "--output", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["capacity"] is not None and 4 <= summary["capacity"] < 512 and 2 <= len(summary["points"]) <= 5
    assert summary["best"]["load"] == summary["capacity"] and "capacity:" in out
    assert pq.read_table(tmp_path / "records.parquet").num_rows > 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--client-processes", "0"], "argument --client-processes: 0 is outside 1..256"),
    (["--client-processes", "100000"], "argument --client-processes: 100000 is outside 1..256"),
    (["--duration", "nan"], "argument --duration: 'nan' is not a finite number"),
    (["--timeout", "inf"], "argument --timeout: 'inf' is not a finite number"),
    (["--max-concurrency", "-1"], "argument --max-concurrency: -1 is outside 1..2147483647"),
    (["--requests", "-3"], "argument --requests/--num-prompts: -3 is outside 1..2147483647"),
    (["--seed", "-1"], "argument --seed: -1 is outside 0..4294967295"),
    (["--burstiness", "0"], "argument --burstiness: 0 is outside (0, 1000]"),
    (["--tolerance", "2"], "argument --tolerance: 2 is outside (0, 1)"),
    (["--url", "ftp://x"], "argument --url/--base-url: 'ftp://x' is not an http(s) URL with a host"),
    (["--output", ""], "argument --output: is empty; give a path"),
])
def test_bad_numbers_and_urls_are_refused_by_the_parser(args: list[str], needle: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Values that parse as numbers but cannot work (nan, inf, negative, a fork bomb of client processes) are
    refused before any load code runs (they used to raise ValueError or OverflowError, or start the run)."""
    from tuner.bench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--url", "http://127.0.0.1:9", "--model", "m", "--workload", "static", "--rate", "1", *args])
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_time_scale_reads_a_faster_server_on_its_own_clock(fake_server: Callable[..., Any], tmp_path: Path) -> None:
    # the server streams a token every 2 ms of wall time; told it runs 5x faster than the wall clock, the bench
    # sends 5x faster and reads every time x5: ITL ~10 ms on the server's clock (without the flag: ~2 ms)
    srv = fake_server("--ttft-ms", "2", "--itl-ms", "2")
    common = ("--url", srv.url, "--model", "fake", "--workload", "dynamic", "--rate", "10", "--requests", "30",
              "--max-model-len", "2048", "--warmup", "0", "--no-progress")
    scaled = bench(*common, "--time-scale", "5", "--output", str(tmp_path / "s"))
    plain = bench(*common, "--output", str(tmp_path / "p"))
    assert scaled.returncode == 0 and plain.returncode == 0, scaled.stdout + scaled.stderr + plain.stderr
    s = json.loads((tmp_path / "s" / "summary.json").read_text())
    p = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert s["completed"] == p["completed"] == 30
    assert 3.5 * p["p50_itl_ms"] <= s["p50_itl_ms"] <= 7 * p["p50_itl_ms"], (s["p50_itl_ms"], p["p50_itl_ms"])
    assert bench(*common, "--time-scale", "0").returncode == 2
