"""benchmarks/sglang_workload_host.py reads SGLang server logs split by the client's phases and applies its committed
rule: checked on logs written from the simulator's own SGLang decode step plus a known extra time per phase."""

from __future__ import annotations

import dataclasses
import gzip
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import benchmarks.sglang_workload_host as wh
from benchmarks.calibrate_sglang import TRITON_BF16, engine
from tuner.sim.calibration import SGLANG_FITTED

T0 = datetime(2026, 12, 7, 3, 0, 0)


def _step_s(n: int, ctx: int) -> float:
    eng = engine(TRITON_BF16, dataclasses.replace(SGLANG_FITTED, step_extra_s=0.0))
    return eng.cost.decode_base(n, True) + eng.cost.dec_b * ctx


def _server(folder: Path, extra_ms: dict[str, float]) -> None:
    """A server folder whose random and dynamic phases decode 8 sequences with `extra_ms` over the model's step."""
    folder.mkdir(parents=True)
    lines, marks, t = [], [], T0
    for w in wh.WORKLOADS:
        marks.append(f"{w} start {t:%Y-%m-%dT%H:%M:%S} local {t:%Y-%m-%d %H:%M:%S}")
        t += timedelta(seconds=1)
        lines.append(f"[{t:%Y-%m-%d %H:%M:%S}] Prefill batch, #new-seq: 1, #new-token: 2048, cuda graph: True")
        for i in range(20):
            n, ctx = 8, 8 * (2000 + 10 * i)
            thr = n / (_step_s(n, ctx) + extra_ms[w] / 1e3)
            lines.append(f"[{t:%Y-%m-%d %H:%M:%S}] Decode batch, #running-req: {n}, #token: {ctx}, token usage: 0.05, "
                         f"cuda graph: True, gen throughput (token/s): {thr:.2f}, #queue-req: 0")
            t += timedelta(seconds=1)
        marks.append(f"{w} end {t:%Y-%m-%dT%H:%M:%S} local {t:%Y-%m-%d %H:%M:%S}")
        t += timedelta(seconds=5)
    (folder / "phases.txt").write_text("\n".join(marks) + "\n")
    with gzip.open(folder / "batches.log.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")


@pytest.mark.parametrize(("ctx16k", "ctxdef", "want"), [
    ({"random": 0.3, "dynamic": 2.0}, {"random": 0.4, "dynamic": 2.1}, "W"),
    ({"random": 2.0, "dynamic": 2.1}, {"random": 0.3, "dynamic": 0.4}, "C"),
    ({"random": 0.3, "dynamic": 0.5}, {"random": 0.4, "dynamic": 0.3}, "H: the host (the studies' hosts were slow)"),
    ({"random": 0.3, "dynamic": 2.0}, {"random": 0.3, "dynamic": 0.5}, "undecided"),
])
def test_the_rule_reads_each_phase_extra_time_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   ctx16k: dict[str, float], ctxdef: dict[str, float], want: str) -> None:
    _server(tmp_path / "ctx16k", ctx16k)
    _server(tmp_path / "ctxdef", ctxdef)
    monkeypatch.setattr(wh, "DATA", tmp_path)
    r = {}
    eng = wh.base_engine(wh.gpu())
    for s, extra in (("ctx16k", ctx16k), ("ctxdef", ctxdef)):
        got = wh.phase_samples(tmp_path / s)
        for w in wh.WORKLOADS:
            assert len(got[w]) == 19  # the first decode line after a prefill opens an interval, it closes none
            r[(s, w)] = wh.residual_ms(eng, got[w])
            assert r[(s, w)] == pytest.approx(extra[w], abs=0.02)
    assert wh.verdict(r).startswith(want)


def test_an_h100_run_is_not_read_as_a_host_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wh, "DATA", tmp_path)
    (tmp_path / "gpu.txt").write_text("NVIDIA H100 80GB HBM3\n")
    r = {(s, w): 0.3 for s in wh.SERVERS for w in wh.WORKLOADS}
    assert wh.gpu() == "H100"
    assert wh.verdict(r).startswith("neither W nor C")


def test_the_w_fit_reads_every_server_phase(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The fit main prints is the W form over all four phases of the run's two servers (a first version read the second
    server's phases twice and the first server's not at all)."""
    data = Path(wh.ROOT) / "benchmarks/reference/h100-sglang-0.5.17-workload"
    monkeypatch.setattr(wh, "DATA", data)
    wh.main()
    fit = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("W form fitted"))
    samples = [x for s in wh.SERVERS for w in wh.WORKLOADS for x in wh.phase_samples(data / s)[w]]
    c0, c1 = wh.w_form(wh.base_engine("H100"), samples)
    assert fit.endswith(f"residual ms = {c0:.3f} + {c1:.4f} x context per sequence (k tokens)")
    assert len({round(x[2], 9) for x in wh.phase_samples(data / "ctx16k")["dynamic"]} - {
        round(x[2], 9) for x in wh.phase_samples(data / "ctxdef")["dynamic"]}) > 0  # the servers' intervals differ
