"""Fit SGLang's step-cost terms (tuner/sim/sglang_cost.py) on SGLang's own decode-batch log lines.

SGLang logs every 40 decode steps (`decode_log_interval`) a line with `#running-req`, `#token` (KV tokens held by
running requests; the radix cache's evictable tokens are not counted) and `gen throughput` (tokens generated
since the last line / the time since it). Between two such lines with no prefill batch in between and a batch
size that moved by at most 15 %, one decode step took (mean batch size) / throughput. Each such interval is one
sample (batch size n, context tokens, step seconds).

The model: step = the base calibration's decode step without KV reads (weights, per-step and per-token
overheads, as for vLLM) + `step_extra_s` + context x KV bytes per token / (HBM bandwidth x `triton_e_kv`).
Least squares over the fit samples gives `step_extra_s` and `triton_e_kv`. FP8 is not fitted: SGLang's FP8
weight gain is the exact halved bytes (2.0) and the triton FP8 KV/attention gains 1.0 (priors, printed
against the FP8 trial's samples as a held-out check).

Prefill: SGLang's prefill steps are not in its log with their duration (the overlap scheduler logs a batch when it
is scheduled), so `triton_e_attn` (the FLOP efficiency of triton's prefill attention; the base's 0.536 is FA
on vLLM) is chosen on a grid to minimise the mean |error| over output tok/s, P50/P99 TTFT and P50/P99 TPOT of
the BF16 fit study points (each simulated as sim_fidelity.py does, with the decode terms above); then SGLang's
`fp8_lin_gain` (FP8 prefill GEMMs; the study ran with SGLANG_ENABLE_JIT_DEEPGEMM=0) the same way on the one FP8
fit point, trial 3 at 6 req/s (leave-one-out: trial 3 at 12 req/s stays held out). Every SGLang study point's
errors are printed, held-out ones marked, also with FP8 on the priors alone.

Fit (decode terms): h200-sglang-dynamic trial 0 (6 req/s) and the joint study's SGLang trial 1 at 6 and 12 req/s
(its log's first two points). Held out: trial 1 at 9 req/s (the log's third point) and trial 3 (FP8 weights +
KV) at 6 and 12 req/s. The study points (tuner.sim.calibration.SGLANG_FIT_POINTS; the others held out) are
checked end to end by benchmarks/sim_fidelity.py.

Then the lead's H200 SGLang rate sweep (benchmarks/reference/h200-sglang-0.5.17-sweep, never fitted on for the
committed terms): its server log against the decode terms and the same regression on it alone, its points replayed
with their real send times, and the other split (every BF16 term fitted on the sweep, the study points held out).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/calibrate_sglang.py
"""

from __future__ import annotations

import dataclasses
import gzip
import re
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.load.capacity import measure_point  # noqa: E402
from tuner.load.records import Request  # noqa: E402
from tuner.load.target import VirtualTarget  # noqa: E402
from tuner.sim.calibration import SGLANG_FIT_POINTS, SGLANG_FITTED  # noqa: E402
from tuner.sim.detailed import load_json  # noqa: E402
from tuner.sim.engine import SimulatedEngine  # noqa: E402
from tuner.sim.reference import FIGURES, REPO, STUDY_SETS, StudyPoint, study_points  # noqa: E402
from tuner.sim.sglang_cost import SGLangTerms  # noqa: E402
from tuner.spec.load import load_study  # noqa: E402

H200 = ROOT / "benchmarks/results/h200"
ALONE = H200 / "h200-sglang-dynamic/trials/000-94acd754.engine.log.gz"
JOINT_T1 = H200 / "h200-joint-dynamic/trials/001-da49081a.engine.log.gz"  # triton, BF16: @6, @12, @9 in order
JOINT_T3 = H200 / "h200-joint-dynamic/trials/003-5ce28921.engine.log.gz"  # triton, FP8 weights + KV: @6, @12
POINT_START = "#new-token: 4790,"  # the study's first warm-up prompt (seed 0): each load point starts with it
DECODE = re.compile(r"Decode batch, #running-req: (\d+), #token: (\d+), .*gen throughput \(token/s\): ([\d.]+)")
TRITON_BF16 = {"attention_backend": "triton"}
TRITON_FP8 = {"attention_backend": "triton", "quantization": "fp8", "kv_cache_dtype": "fp8_e4m3"}


def decode_samples(path: Path, point_start: str = POINT_START) -> list[list[tuple[float, float, float]]]:
    """Per load point of the log: (mean batch size, context tokens, seconds per decode step) per clean interval
    (`point_start`: the line that starts a load point; empty: the whole log is one)."""
    with gzip.open(path, "rt", errors="replace") as f:
        return decode_lines(f, point_start)


def decode_lines(lines: Iterable[str], point_start: str) -> list[list[tuple[float, float, float]]]:
    points: list[list[tuple[float, float, float]]] = [] if point_start else [[]]
    prev: int | None = None
    for line in lines:
        if "Prefill batch" in line:
            if point_start and point_start in line:
                points.append([])
            prev = None
            continue
        m = DECODE.search(line)
        if not m or not points:
            continue
        n, ctx, thr = int(m[1]), int(m[2]), float(m[3])
        if prev is not None and thr > 0 and abs(n - prev) <= 0.15 * prev + 1:
            nm = (n + prev) / 2
            points[-1].append((nm, float(ctx), nm / thr))
        prev = n
    return points


def without_step_terms(terms: SGLangTerms) -> SGLangTerms:
    """`terms` with no fixed per-step extra and no triton decode form: the base the step residuals are read over."""
    return dataclasses.replace(terms, step_extra_s=0.0, triton_decode_s=None, triton_kv_seq_s=0.0)


def engine(args: dict[str, str], terms: SGLangTerms | None, gpu: str = "H200") -> SimulatedEngine:
    return SimulatedEngine(flavour="sglang", gpu=gpu, shape="qwen3-8b", args=args, max_model_len=16384,
                           sglang_terms=terms)


def predicted(eng: SimulatedEngine, samples: list[tuple[float, float, float]]) -> np.ndarray:
    """The simulator's decode step at each sample (a fractional mean batch size interpolated)."""
    c = eng.cost

    def base(n: float) -> float:
        lo = int(n)
        return (1 - (n - lo)) * c.decode_base(lo, True) + (n - lo) * c.decode_base(lo + 1, True)

    return np.array([base(n) + c.dec_b * ctx + c.kv_seq * ctx / n for n, ctx, _ in samples])


def errors(eng: SimulatedEngine, samples: list[tuple[float, float, float]]) -> list[float]:
    real = np.array([s[2] for s in samples])
    return list(np.abs(predicted(eng, samples) / real - 1) * 100)


def simulate_point(sp: StudyPoint, terms: SGLangTerms | None) -> dict[str, float]:
    """An SGLang study point through the simulator with `terms` (as tuner.sim.reference.simulate_study_point)."""
    study = load_study(REPO / sp.study)
    eng = SimulatedEngine(flavour=sp.engine, gpu="H200", shape=study.model.shape or "qwen3-8b", args=dict(sp.args),
                          max_model_len=study.model.max_model_len, dtype=study.model.dtype, sglang_terms=terms)
    point, _ = measure_point(VirtualTarget(eng), study.workload, study.sla, study.capacity, sp.load, seed=study.seed,
                             max_model_len=study.model.max_model_len, base_dir=REPO)
    return {f: float(point.summary[f]) for f in FIGURES}


def point_errors(sp: StudyPoint, terms: SGLangTerms | None) -> list[float]:
    sim, real = simulate_point(sp, terms), dict(sp.real)
    return [(sim[f] / real[f] - 1) * 100 for f in FIGURES]


def _fp8(sp: StudyPoint) -> bool:
    return dict(sp.args).get("quantization") == "fp8"


def _grid(name: str, terms: SGLangTerms, grid: list[float | None], fit: list[StudyPoint]) -> float | None:
    """The value of `name` on `grid` with the least mean |error| over the fit points' five figures."""
    score = {}
    for v in grid:
        t = dataclasses.replace(terms, **{name: v})
        score[v] = statistics.mean(abs(e) for sp in fit for e in point_errors(sp, t))
    best = min(score, key=lambda k: score[k])
    print(f"{name}: mean |error| % over {len(fit)} fit point(s): " + " ".join(f"{k}:{v:.1f}" for k, v in score.items()))
    print(f"  best {name}={best} (in tuner/sim/calibration.py: {getattr(SGLANG_FITTED, name)})")
    return best


def leave_one_out(terms: SGLangTerms, bf16: list[StudyPoint]) -> None:
    """triton_e_attn fitted on all BF16 SGLang study points but one (held-out t1 @9 included), that one predicted."""
    grid = [round(0.2 + 0.01 * i, 2) for i in range(21)]
    errs = {v: {sp: point_errors(sp, dataclasses.replace(terms, triton_e_attn=v)) for sp in bf16} for v in grid}
    print("leave-one-out over the BF16 points (triton_e_attn fitted on the others; the left-out point's signed error %):")
    for out in bf16:
        rest = [sp for sp in bf16 if sp is not out]
        best = min(grid, key=lambda v: statistics.mean(abs(e) for sp in rest for e in errs[v][sp]))
        print(f"  {out.name:58s} triton_e_attn={best} " + " ".join(f"{e:4.0f}" for e in errs[best][out]))


def fit_prefill(terms: SGLangTerms) -> None:
    """Grids over triton_e_attn (BF16 fit points), then SGLang's fp8_lin_gain (the FP8 fit point); every SGLang
    study point's errors with the terms in tuner/sim/calibration.py."""
    pts = [sp for results, study in STUDY_SETS for sp in study_points(results, study) if sp.engine == "sglang"]
    fit = [sp for sp in pts if (sp.results, sp.trial, sp.load) in SGLANG_FIT_POINTS]
    assert len(fit) == len(SGLANG_FIT_POINTS), [sp.name for sp in fit]
    e_attn = _grid("triton_e_attn", terms, [None] + [round(0.2 + 0.01 * i, 2) for i in range(21)],
                   [sp for sp in fit if not _fp8(sp)])
    _grid("fp8_lin_gain", dataclasses.replace(terms, triton_e_attn=e_attn),
          [None] + [round(1.0 + 0.05 * i, 2) for i in range(21)], [sp for sp in fit if _fp8(sp)])
    leave_one_out(terms, [sp for sp in pts if not _fp8(sp)])
    print("signed error % (tok/s TTFT50 TTFT99 TPOT50 TPOT99) with the terms in tuner/sim/calibration.py; with them "
          "but FP8 on priors only (fp8_lin_gain: vLLM's); without SGLang terms:")
    prior = dataclasses.replace(SGLANG_FITTED, fp8_lin_gain=None)
    for sp in pts:
        tag = "fit" if sp in fit else "held-out"
        cells = [" ".join(f"{e:4.0f}" for e in point_errors(sp, t)) for t in (SGLANG_FITTED, prior, None)]
        print(f"  {sp.name:58s} {tag:8s} {cells[0]}   (FP8 priors: {cells[1]})   (before: {cells[2]})")


REQUESTS = (H200 / "h200-sglang-dynamic/requests_baseline.parquet",
            H200 / "h200-joint-dynamic/requests_sglang_baseline.parquet")  # per request, both @6 (fit points)
QUANTILES = (10, 25, 50, 75, 90, 95, 99)


def replay_requests() -> None:
    """Per-request distributions at 6 req/s: the measured phase (warm-ups ran before it) fed to the simulator with
    its real send times and lengths; ITL and TTFT quantiles, sim / real ms, with and without the SGLang terms."""
    import pyarrow.parquet as pq

    for path in REQUESTS:
        rows = [r for r in pq.read_table(path).to_pylist() if not r["error"] and not r["warmup"]]
        reqs = [Request(i, float(r["sent_s"]), int(r["input_len"]), int(r["output_len"])) for i, r in enumerate(rows)]
        real_itl = np.concatenate([np.diff(r["token_times"]) for r in rows]) * 1e3
        real_ttft = np.array([r["ttft_ms"] for r in rows])
        for label, terms in (("with", SGLANG_FITTED), ("without", None)):
            recs = engine(TRITON_BF16, terms).run(reqs)
            itl = np.concatenate([np.diff(x.token_times) for x in recs]) * 1e3
            ttft = np.array([(x.first_token_s - x.sent_s) * 1e3 for x in recs])  # type: ignore[operator]
            cells = " ".join(f"P{q}={s:.1f}/{r:.1f}" for q, s, r in zip(
                QUANTILES, np.percentile(itl, QUANTILES), np.percentile(real_itl, QUANTILES), strict=True))
            print(f"  {path.parent.name} ({label} SGLang terms): ITL {cells}  TTFT P50={np.median(ttft):.0f}/"
                  f"{np.median(real_ttft):.0f} P99={np.percentile(ttft, 99):.0f}/{np.percentile(real_ttft, 99):.0f}")


SWEEP = ROOT / "benchmarks/reference/h200-sglang-0.5.17-sweep"  # the lead's H200 SGLang rate sweep (README there)
SWEEP_LOG = ("logs_sgl_triton.tar.gz", "./server_sgl_triton.log")


def sweep_requests(data: dict[str, Any]) -> list[Request]:
    """A `vllm bench serve --save-detailed` result's requests as they were sent (start_times, lengths; the stored
    sweep keeps no ITLs, so tuner.sim.detailed.bench_run does not apply)."""
    t0 = min(data["start_times"])
    return [Request(i, float(t - t0), int(i_len), int(o_len)) for i, (t, i_len, o_len) in
            enumerate(zip(data["start_times"], data["input_lens"], data["output_lens"], strict=True))]


def sweep_points(folder: Path, terms: SGLangTerms | None) -> list[tuple[str, dict[str, Any], dict[str, float],
                                                                         dict[str, float]]]:
    """The sweep's points (fixed 2048/512 lengths, Poisson) replayed with their real send times through the
    simulator with `terms`: (file stem, result, sim, real) per point (vllm bench's figures)."""
    from tuner.sim.reference import METRICS, figures

    out = []
    for f in sorted(folder.glob("bench_*.json")):
        data = load_json(f)
        sim = figures(engine(TRITON_BF16, terms).run(sweep_requests(data)))
        out.append((f.stem, data, sim, {m: float(data[m]) for m in METRICS}))
    return out


def sweep_check(folder: Path, terms: SGLangTerms | None) -> list[dict[str, float]]:
    """sweep_points, printed: sim/real per point, |error| %."""
    out = []
    for stem, data, sim, real in sweep_points(folder, terms):
        err = {m: abs(sim[m] / real[m] - 1) * 100 for m in real}
        out.append(err)
        print(f"  {stem + '.json':26s} rate={data['request_rate']:4.1f} " + " ".join(
            f"{m.replace('_ms', '').replace('output_throughput', 'tok/s')}={sim[m]:.1f}/{real[m]:.1f} {err[m]:.0f}%"
            for m in real))
    return out


def sweep_decode_samples() -> list[tuple[float, float, float]]:
    """The sweep server's clean decode intervals (one segment: the whole log)."""
    import tarfile

    with tarfile.open(SWEEP / SWEEP_LOG[0]) as tar:
        member = tar.extractfile(SWEEP_LOG[1])
        assert member is not None
        text = member.read().decode(errors="replace")
    return decode_lines(text.splitlines(), "")[0]


def decode_fit(samples: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(step_extra_s, triton_e_kv) from decode intervals: over the base calibration, y - its step without KV
    reads = extra + slope x context, and dec_b = KV bytes per token / (bandwidth x e_kv) gives e_kv."""
    plain = engine(TRITON_BF16, None)
    ctx = np.array([s[1] for s in samples])
    y = np.array([s[2] for s in samples]) - (predicted(plain, samples) - plain.cost.dec_b * ctx)
    (extra, slope), *_ = np.linalg.lstsq(np.c_[np.ones(len(samples)), ctx], y, rcond=None)
    return float(extra), float(plain.cost.dec_b * plain.cal.e_kv / slope)


def main() -> None:
    alone, t1, t3 = decode_samples(ALONE), decode_samples(JOINT_T1), decode_samples(JOINT_T3)
    assert len(alone) == 1 and len(t1) == 3 and len(t3) == 2, (len(alone), len(t1), len(t3))
    fit = alone[0] + t1[0] + t1[1]
    extra, e_kv = decode_fit(fit)
    print(f"fit samples={len(fit)} (h200-sglang-dynamic t0 @6, h200-joint-dynamic t1 @6 @12): "
          f"step_extra_s={extra:.6g} triton_e_kv={e_kv:.6g}")
    cur = SGLANG_FITTED
    print(f"in tuner/sim/calibration.py: step_extra_s={cur.step_extra_s:.6g} triton_e_kv={cur.triton_e_kv:.6g} "
          f"fp8_w_gain={cur.fp8_w_gain:g} triton_fp8_kv_gain={cur.triton_fp8_kv_gain:g}")
    sets = (("fit", fit, TRITON_BF16), ("held-out t1 @9", t1[2], TRITON_BF16),
            ("held-out t3 fp8 @6", t3[0], TRITON_FP8), ("held-out t3 fp8 @12", t3[1], TRITON_FP8))
    for name, smp, args in sets:
        old, new = errors(engine(args, None), smp), errors(engine(args, cur), smp)
        print(f"  {name:20s} samples={len(smp):3d} decode step |error| median/max %: "
              f"without SGLang terms {statistics.median(old):5.1f}/{max(old):5.1f}  "
              f"with {statistics.median(new):5.1f}/{max(new):5.1f}")
    fit_prefill(dataclasses.replace(cur, step_extra_s=extra, triton_e_kv=e_kv))
    print("per-request replays at 6 req/s (sim/real ms):")
    replay_requests()
    sweep()


def sweep() -> None:
    """The H200 SGLang rate sweep, never fitted on: its decode log against the decode terms, its points end to end."""
    smp = sweep_decode_samples()
    for label, terms in (("with", SGLANG_FITTED), ("without", None)):
        e = errors(engine(TRITON_BF16, terms), smp)
        print(f"sweep server log ({label} SGLang terms): {len(smp)} decode intervals, |error| median/max % "
              f"{statistics.median(e):.1f}/{max(e):.1f}")
    extra, e_kv = decode_fit(smp)
    print(f"  the same regression on the sweep's log alone: step_extra_s={extra:.6g} triton_e_kv={e_kv:.6g}")
    for label, terms in (("with", SGLANG_FITTED), ("without", None)):
        print(f"sweep points ({label} SGLang terms; sim/real, |error| %):")
        errs = sweep_check(SWEEP, terms)
        print("  median |error| %: " + " ".join(f"{k}={statistics.median(e[k] for e in errs):.1f}" for k in errs[0]))
    # the other split: every term fitted on the sweep (decode terms on its log, triton_e_attn on its points), the
    # study points all held out
    alt = dataclasses.replace(SGLANG_FITTED, step_extra_s=extra, fp8_lin_gain=None,  # FP8: priors only
                              triton_e_kv=e_kv)
    from tuner.sim.reference import figures

    datas = [load_json(f) for f in sorted(SWEEP.glob("bench_*.json"))]
    figs = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")

    def sweep_score(t: SGLangTerms) -> float:
        return statistics.mean(abs(figures(engine(TRITON_BF16, t).run(sweep_requests(d)))[m] / float(d[m]) - 1) * 100
                               for d in datas for m in figs)

    grid = [round(0.2 + 0.02 * i, 2) for i in range(11)] + [None]
    best = min(grid, key=lambda v: sweep_score(dataclasses.replace(alt, triton_e_attn=v)))
    alt = dataclasses.replace(alt, triton_e_attn=best)
    print(f"fit on the sweep alone: step_extra_s={alt.step_extra_s:.4g} triton_e_kv={alt.triton_e_kv:.4g} "
          f"triton_e_attn={best} (sweep mean |error| {sweep_score(alt):.1f} %); the study points, all held out "
          "(signed error %: tok/s TTFT50 TTFT99 TPOT50 TPOT99):")
    for sp in [sp for r, st in STUDY_SETS for sp in study_points(r, st) if sp.engine == "sglang"]:
        print(f"  {sp.name:58s} " + " ".join(f"{e:4.0f}" for e in point_errors(sp, alt)))


if __name__ == "__main__":
    main()
