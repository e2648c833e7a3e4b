"""The host probe (tuner/sim/host.py): a run on a host with a known launch is fitted back to it, bad input exits 2,
and a study's `sim.host_factors` reaches the simulator in both faces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from tests.engines.test_argv import launch
from tests.sim.simhelp import poisson
from tuner.engines import get_engine
from tuner.sim import SimulatedEngine
from tuner.sim.calibration import FITTED
from tuner.sim.host import apply_host, fit_host, host_calibration
from tuner.spec.study import SimSettings

ROOT = Path(__file__).resolve().parents[2]


def measured_run(launch_x: float, step_x: float, n: int = 120, rate: float = 6.0) -> dict[str, Any]:
    """What `vllm bench serve --save-detailed` writes for a run on a host `launch_x` / `step_x` of the calibration:
    Qwen3-1.7B on an H100, 1024 in / 128 out (the simulator plays the host)."""
    eng = SimulatedEngine(flavour="vllm", gpu="H100", shape="qwen3-1.7b", args={}, max_model_len=40960,
                          calibration=apply_host(FITTED, launch_x, step_x))
    recs = eng.run(poisson(n, rate, 1024, 128, seed=3))
    return {"num_prompts": n, "completed": n, "input_lens": [r.input_len for r in recs],
            "output_lens": [r.output_tokens for r in recs], "ttfts": [r.ttft_s for r in recs],
            "itls": [np.diff(r.token_times).tolist() for r in recs], "start_times": [100.0 + r.sent_s for r in recs]}


def test_the_fit_finds_the_hosts_launch_and_step() -> None:
    fit = fit_host(measured_run(0.5, 1.1), "qwen3-1.7b", "H100", launch_grid=(0.3, 0.5, 0.7, 1.0),
                   step_grid=(0.9, 1.0, 1.1))
    assert (fit.launch, fit.step) == (0.5, 1.1)
    assert fit.loss < fit.loss_calibrated  # the shipped calibration reads this host worse


def test_a_run_without_per_request_data_is_refused() -> None:
    data = measured_run(1.0, 1.0)
    with pytest.raises(ValueError, match="--save-detailed"):
        fit_host({k: v for k, v in data.items() if k not in ("ttfts", "itls")}, "qwen3-1.7b", "H100")
    with pytest.raises(ValueError, match="start_times"):
        fit_host({k: v for k, v in data.items() if k != "start_times"}, "qwen3-1.7b", "H100")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.sim.host", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_the_command_prints_a_study_block_the_study_accepts(tmp_path: Path) -> None:
    f = tmp_path / "probe.json"
    f.write_text(json.dumps(measured_run(0.4, 1.0, n=100)))
    out = cli("--bench", str(f), "--shape", "qwen3-1.7b", "--gpu", "H100")
    assert out.returncode == 0, out.stderr
    block = out.stdout.split("sim:\n", 1)[1]
    host = block.split("host_factors: ", 1)[1].strip()
    pairs = dict(kv.split(": ") for kv in host.strip("{}").split(", "))
    settings = SimSettings(gpu="H100", host_factors={k: float(v) for k, v in pairs.items()})
    assert settings.host_factors is not None and abs(settings.host_factors.launch - 0.4) <= 0.1


@pytest.mark.parametrize(("args", "says"), [
    (["--bench", "/nonexistent.json", "--shape", "qwen3-8b", "--gpu", "H100"], "no such file"),
    (["--bench", "/dev/null", "--shape", "qwen3-0b", "--gpu", "H100"], "unknown model shape"),
    (["--bench", "/dev/null", "--shape", "qwen3-8b", "--gpu", "Z9"], "unknown GPU"),
    (["--bench", "/dev/null", "--shape", "qwen3-8b", "--gpu", "H100", "--args", "[1]"], "JSON object"),
    (["--bench", "/dev/null", "--shape", "qwen3-8b", "--gpu", "H100", "--args", "{x"], "not JSON"),
    (["--bench", "/dev/null", "--shape", "qwen3-8b", "--gpu", "H100", "--args",
      '{"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}'], "cannot probe the host"),
])
def test_bad_input_exits_2_with_a_reason(args: list[str], says: str) -> None:
    out = cli(*args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


def test_a_result_without_per_request_data_exits_2(tmp_path: Path) -> None:
    f = tmp_path / "plain.json"
    f.write_text(json.dumps({"completed": 10, "p99_itl_ms": 20.0}))
    out = cli("--bench", str(f), "--shape", "qwen3-8b", "--gpu", "H100")
    assert out.returncode == 2 and "--save-detailed" in out.stderr


def test_the_studys_host_reaches_both_faces() -> None:
    s = SimSettings(gpu="H100", host_factors={"launch": 0.4, "step": 1.1})
    cal = host_calibration(s.host_factors)
    assert cal is not None
    assert cal.prompt_cpu_step_s == pytest.approx(0.4 * FITTED.prompt_cpu_step_s)
    assert cal.o_step_s == pytest.approx(1.1 * FITTED.o_step_s)
    assert host_calibration(None) is None
    argv = get_engine("sim").argv({}, launch(s))
    assert argv[argv.index("--host-launch") + 1] == "0.4" and argv[argv.index("--host-step") + 1] == "1.1"
    assert "--host-launch" not in get_engine("sim").argv({}, launch(SimSettings()))


@pytest.mark.parametrize("bad", [{"launch": 0.0}, {"launch": 9}, {"step": -1}, {"lanuch": 0.5}])
def test_host_factors_are_strict(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        SimSettings(host_factors=bad)


def test_servetune_host_is_the_same_command() -> None:
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "host", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("usage: servetune host") and "--save-detailed" in out.stdout


def write_records(path: Path, launch_x: float, step_x: float, n: int = 120) -> None:
    """servetune's own records (what `servetune bench --output` and a trial's requests.parquet hold) of a run on a
    host `launch_x` / `step_x` of the calibration, with two warm-up requests and one failure that must be left out."""
    from dataclasses import replace

    from tuner.load.records_io import RecordWriter

    eng = SimulatedEngine(flavour="vllm", gpu="H100", shape="qwen3-1.7b", args={}, max_model_len=40960,
                          calibration=apply_host(FITTED, launch_x, step_x))
    recs = eng.run(poisson(n, 6.0, 1024, 128, seed=3))
    odd = [replace(recs[0], id=10_000, warmup=True, first_token_s=recs[0].sent_s + 9.0),
           replace(recs[1], id=10_001, error="http 500", done_s=None)]
    with RecordWriter(path) as w:
        for r in [*odd, *recs]:
            w.write(r)


def test_servetune_records_are_fitted_like_a_bench_result(tmp_path: Path) -> None:
    from tuner.sim.host import fit_host_run, load_run

    f = tmp_path / "records.parquet"
    write_records(f, 0.5, 1.1)
    run = load_run(None, f)
    assert len(run) == 120 and run.start_times is not None and run.start_times[0] == 0.0
    assert max(run.ttfts) < 9.0  # the warm-up request's 9 s TTFT is not part of the run
    fit = fit_host_run(run, "qwen3-1.7b", "H100", launch_grid=(0.3, 0.5, 0.7, 1.0), step_grid=(0.9, 1.0, 1.1))
    assert (fit.launch, fit.step) == (0.5, 1.1)


def test_the_command_reads_servetune_records(tmp_path: Path) -> None:
    f = tmp_path / "records.parquet"
    write_records(f, 0.4, 1.0, n=100)
    out = cli("--records", str(f), "--shape", "qwen3-1.7b", "--gpu", "H100")
    assert out.returncode == 0, out.stderr
    assert "# 100 requests" in out.stdout and "host_factors: {launch: 0.4" in out.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["--records", str(ROOT / "README.md"), "--shape", "qwen3-8b", "--gpu", "H100"], "not a servetune records file"),
    (["--records", "/nonexistent.parquet", "--shape", "qwen3-8b", "--gpu", "H100"], "no such file"),
    (["--bench", "/dev/null", "--records", "/dev/null", "--shape", "qwen3-8b", "--gpu", "H100"], "not allowed with"),
])
def test_bad_records_input_exits_2_with_a_reason(args: list[str], says: str) -> None:
    out = cli(*args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


def test_the_command_warns_when_the_factors_cannot_model_the_run(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    write_records(good, 0.5, 1.1, n=100)
    write_records(bad, 0.5, 3.0, n=100)  # a step time 3x the calibrated one: beyond the step grid
    ok, off = (cli("--records", str(f), "--shape", "qwen3-1.7b", "--gpu", "H100") for f in (good, bad))
    assert ok.returncode == 0 and "warning" not in ok.stderr
    assert off.returncode == 0 and "do not model this engine" in off.stderr and "host_factors" in off.stdout

