"""Is SGLang's extra decode-step time a property of the workload, of the launch's context length, or of the host?
(issue 17; a diagnostic: it fits nothing into the calibration by itself).

The committed SGLang step (tuner/sim/calibration.py SGLANG_FITTED) carries `step_extra_s` = 2.54 ms, fitted on the
decode log of servetune's dynamic-mix studies; on the 2048/512 rate sweep and on the round-7 flag runs the same
regression gives ~0.3-0.9 ms, and the sim reads the sweep's P50 TPOT ~38 % too slow (docs/sim.md, SGLang). Three
things differ between those sets: the workload (the seeds' dynamic mix against random 2048/512), the launch's context
length (the studies pass `max_model_len: 16384` -> `--context-length 16384`; the sweep and the flag runs left it at the
model's 40,960), and the host (each set ran on another H200 machine). The flags (sampling backend, metrics) and the
client were ruled out in round 7.

The runs (`benchmarks/reference/h100-sglang-0.5.17-workload/`, README there): on ONE machine, two SGLang 0.5.17
servers one after the other, triton attention, `--enable-metrics` (servetune's launch), dummy Qwen3-8B weights, each
driven by servetune's client at 6 req/s (Poisson, seed 0) first with the sweep's workload (random 2048/512), then
with the studies' dynamic mix: `ctx16k` with `--context-length 16384` (the studies' launch) and `ctxdef` without
it (the sweep's). Per server and workload phase, the clean decode intervals of the server's log (as
benchmarks/calibrate_sglang.py reads them) give r = the median residual over the committed SGLang step without
`step_extra_s`, in ms (studies 1.99, sweep 0.33 in benchmarks/results/sim/sglang_step_forms.txt; 2.05 / 0.39
on the calibration since the hold refit, which moved the base step by 0.057 ms: the rule reads differences only).

RULE (fixed and committed before the runs; each phase needs >= 15 clean intervals to count):
  W (workload)  on every server, r(dynamic) - r(random) >= 1.0 ms.
  C (context)   on every workload, r(ctx16k) - r(ctxdef) >= 1.0 ms.
  H (host)      neither W nor C, and every phase's r within 0.7 ms of every other: the gap is the hosts'.
                Then: all r <= 0.8 ms says the studies' hosts were slow; all r >= 1.5 ms the sweep's was fast.
  otherwise     undecided (both, or neither cleanly).
What follows (also fixed now): W or C -> a form for SGLang's step keyed to what was found, fitted on these runs'
decode intervals only and judged on the older sets (studies, sweep, flag runs) it never saw; it ships only if
sim_fidelity's sglang-sweep P50 TPOT median error drops by >= 10 points and no SGLang study point's P50 or P99 TPOT
error exceeds 10 %, with every vLLM row unchanged. Under W this script fits that form itself (`fit_w_form`: residual =
a + b x context per sequence, the triton kernel's fixed KV splits of benchmarks/sglang_step_forms.py; in the simulator
`SGLangTerms.step_extra_s` = a and `triton_kv_seq_s` = b, off until such a fit ships). H -> the calibration stays; SGLang's per-step time is a host term,
documented as such (what `servetune host` measures on the user's machine).

If only an H100 can be had (added before any run, committed with the rule): the same runs on one H100, the residual
over the committed step on the simulator's H100 (`gpu.txt` in the data folder names the card); W and C as above; H is
not read there (its thresholds are H200 residuals).

RESULT (2026-12-07, one H100; the data folder's README): W. The form fitted on the runs (a fix made after the run:
the fit first read the second server's phases twice and the first server's not at all, -0.281 + 0.3496; fixed,
-0.280 + 0.3518) was judged twice, and neither passes:
  - as committed above (`step_extra_s` = a on EVERY step, prefill included): the sweep's P50 TPOT 38.8 -> 6.5 %, but
    joint t1 @12 P99 TPOT 18 % and t3 FP8 @12 16 % (sim_fidelity.py with the terms set by hand);
  - `judge` below, chosen after that result: the form on triton's decode-only steps (`triton_decode_s` = a), prefill
    steps keeping `step_extra_s`, with which the prefill terms were fitted: 38.8 -> 8.5 %, worst 13.0 % (t1 @12).
So the calibration stays; the form stays in the simulator, off.

SECOND RUN (rule added 2026-12-07 after the first run's result, committed before the second run): the same call
once more, on whatever card comes, its data in `benchmarks/reference/<card>-sglang-0.5.17-workload-2/`.
  - On an H200 (the card of the older sets): W, C and H are read by the rule above. Under W the form is fitted on
    that run alone (the H100 run is not pooled) and judged by `judge`; it ships only if the judge passes.
  - On an H100: a replicate. W and C are read again; nothing is fitted for shipping, and nothing is judged for it.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sglang_workload_host.py [DATA_FOLDER]

Output: benchmarks/results/sim/sglang_workload_host.txt.
"""

from __future__ import annotations

import dataclasses
import gzip
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_sglang as cs  # noqa: E402
import sglang_step_forms as forms  # noqa: E402

from tuner.sim.calibration import SGLANG_FITTED  # noqa: E402
from tuner.sim.engine import SimulatedEngine  # noqa: E402
from tuner.sim.sglang_cost import SGLangTerms  # noqa: E402

DATA = ROOT / "benchmarks/reference/h100-sglang-0.5.17-workload"  # the command line's folder, if one is given
SERVERS = ("ctx16k", "ctxdef")
WORKLOADS = ("random", "dynamic")
MIN_INTERVALS = 15
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
Sample = tuple[float, float, float]
PER_SEQ = dict(forms.FORMS)["+ context per sequence"]  # the form's columns: context per sequence, k tokens


def phases(folder: Path) -> dict[str, tuple[datetime, datetime]]:
    """phases.txt: `WORKLOAD start|end UTC local YYYY-MM-DD HH:MM:SS` (the host clock the server log uses)."""
    marks: dict[tuple[str, str], datetime] = {}
    for line in (folder / "phases.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[3] == "local":
            marks[(parts[0], parts[1])] = datetime.fromisoformat(f"{parts[4]} {parts[5]}")
    return {w: (t, marks[(w, "end")]) for (w, kind), t in marks.items() if kind == "start" and (w, "end") in marks}


def phase_samples(folder: Path) -> dict[str, list[Sample]]:
    """The server log's clean decode intervals, split by the client's phases (host-clock seconds)."""
    with gzip.open(folder / "batches.log.gz", "rt", errors="replace") as f:
        stamped = [(datetime.fromisoformat(m[1]), ln) for ln in f.read().splitlines() if (m := STAMP.match(ln))]
    return {w: cs.decode_lines([ln for t, ln in stamped if t0 <= t <= t1], "")[0]
            for w, (t0, t1) in phases(folder).items()}


def gpu() -> str:
    """The card the runs had (`gpu.txt`: nvidia-smi's name); H200 unless it says H100."""
    f = DATA / "gpu.txt"
    return "H100" if f.exists() and "H100" in f.read_text() else "H200"


def base_engine(card: str) -> SimulatedEngine:
    """The committed SGLang step without `step_extra_s` and the triton decode form (what the residuals are read over)
    on `card`."""
    return cs.engine(cs.TRITON_BF16, cs.without_step_terms(SGLANG_FITTED), card)


def residual_ms(eng: SimulatedEngine, samples: list[Sample]) -> float:
    a = np.array(samples)
    return float(np.median(a[:, 2] - cs.predicted(eng, samples)) * 1e3)


def verdict(r: dict[tuple[str, str], float]) -> str:
    w = all(r[(s, "dynamic")] - r[(s, "random")] >= 1.0 for s in SERVERS)
    c = all(r[("ctx16k", x)] - r[("ctxdef", x)] >= 1.0 for x in WORKLOADS)
    if w and c:
        return "undecided (W and C both hold)"
    if w:
        return "W: the workload"
    if c:
        return "C: the context length"
    vals = list(r.values())
    if gpu() != "H200":
        return "neither W nor C (H is not read off an H200)"
    if max(vals) - min(vals) <= 0.7:
        side = ("the studies' hosts were slow" if max(vals) <= 0.8 else "the sweep's host was fast"
                if min(vals) >= 1.5 else "between the two")
        return f"H: the host ({side})"
    return "undecided (neither W, C nor H)"


def w_form(eng: SimulatedEngine, samples: list[Sample]) -> tuple[float, float]:
    """(a ms, b ms per k tokens of context per sequence): least squares of the residual over `eng`'s step."""
    a = np.array(samples)
    (c0, c1), *_ = np.linalg.lstsq(forms.design(a, PER_SEQ), (a[:, 2] - cs.predicted(eng, samples)) * 1e3, rcond=None)
    return float(c0), float(c1)


def fit_w_form(eng: SimulatedEngine, got: dict[tuple[str, str], list[Sample]]) -> tuple[float, float]:
    """Under W: residual (ms) = a + b x context per sequence (k tokens), least squares over these runs' intervals
    only (sglang_step_forms.py's "+ context per sequence" form: the triton kernel's fixed KV splits); returns (a, b)
    and prints the older sets' step errors under it (sets it never saw)."""
    c0, c1 = w_form(eng, [x for s in got.values() for x in s])
    print(f"W form fitted on these runs: residual ms = {c0:.3f} + {c1:.4f} x context per sequence (k tokens)")
    old = eng if gpu() == "H200" else base_engine("H200")  # the older sets ran on H200s: judged on their card
    resid: dict[str, tuple[float, float]] = {}
    for k, s in forms.sets().items():
        b = np.array(s)
        form = forms.design(b, PER_SEQ) @ np.array([c0, c1])
        base = cs.predicted(old, s) * 1e3
        err = float(np.median(np.abs((base + form) / (b[:, 2] * 1e3) - 1)) * 100)
        resid[k] = (float(np.median(b[:, 2] * 1e3 - base)), float(np.median(form)))
        print(f"  {k:38s} n={len(b):3d} median |error| of the step {err:5.1f} %")
    (st, sf), (wt, wf) = resid["studies (fit: t0 @6, t1 @6, @12)"], resid["sweep (3-6 req/s)"]
    print(f"  the older sets' residual gap, studies - sweep: measured {st - wt:.2f} ms, the form {sf - wf:.2f} ms")
    return float(c0), float(c1)


def w_terms(c0: float, c1: float) -> SGLangTerms:
    """SGLANG_FITTED with the W form (ms, ms per k tokens of context per sequence) on triton's decode-only steps."""
    return dataclasses.replace(SGLANG_FITTED, triton_decode_s=c0 * 1e-3, triton_kv_seq_s=c1 * 1e-6)


def judge(c0: float, c1: float) -> bool:
    """The rule's ship test for the W form (a, b in ms and ms per k tokens): SGLANG_FITTED with it on triton's
    decode-only steps (`triton_decode_s` = a in place of `step_extra_s`, `triton_kv_seq_s` = b; prefill steps keep
    `step_extra_s`, with which the prefill terms were fitted), against the committed terms. Ships only if the sweep's
    P50 TPOT median |error| drops >= 10 points and no SGLang study point's P50 or P99 TPOT |error| exceeds 10 %;
    vLLM's rows cannot move (a vLLM engine refuses the triton decode terms: tuner/sim/engine.py)."""
    cand = w_terms(c0, c1)
    sweep = {}
    for label, terms in (("committed", SGLANG_FITTED), ("W form", cand)):
        errs = [abs(sim["p50_tpot_ms"] / real["p50_tpot_ms"] - 1) * 100
                for _, _, sim, real in cs.sweep_points(cs.SWEEP, terms)]
        sweep[label] = float(np.median(errs))
        print(f"sweep P50 TPOT median |error| ({label}): {sweep[label]:.1f} %")
    worst = 0.0
    print("SGLang study points, |error| % (P50 TPOT, P99 TPOT): committed -> W form")
    for sp in [sp for r, st in cs.STUDY_SETS for sp in cs.study_points(r, st) if sp.engine == "sglang"]:
        e_old, e_new = ([abs(e) for f, e in zip(cs.FIGURES, cs.point_errors(sp, t), strict=True) if f in TPOT]
                        for t in (SGLANG_FITTED, cand))
        worst = max(worst, *e_new)
        print(f"  {sp.name:58s} {e_old[0]:5.1f} {e_old[1]:5.1f} -> {e_new[0]:5.1f} {e_new[1]:5.1f}")
    drop = sweep["committed"] - sweep["W form"]
    ships = drop >= 10.0 and worst <= 10.0
    print(f"rule: sweep P50 TPOT drop {drop:.1f} points (>= 10), worst study TPOT |error| {worst:.1f} % (<= 10): "
          f"{'ships' if ships else 'does not ship'}")
    return ships


TPOT = ("p50_tpot_ms", "p99_tpot_ms")
SHOW = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p50_itl_ms", "p99_itl_ms")


def real_figures(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The measured phase's figures, as tuner.sim.reference.figures computes them from simulated records."""
    itl = np.concatenate([np.diff(r["token_times"]) for r in rows]) * 1e3
    dur = max(r["done_s"] for r in rows) - min(r["sent_s"] for r in rows)
    out = {"output_throughput": sum(r["output_tokens"] for r in rows) / dur}
    for q in (50, 99):
        out[f"p{q}_ttft_ms"] = float(np.percentile([r["ttft_ms"] for r in rows], q))
        out[f"p{q}_tpot_ms"] = float(np.percentile([r["tpot_ms"] for r in rows if r["tpot_ms"] is not None], q))
        out[f"p{q}_itl_ms"] = float(np.percentile(itl, q))
    return out


Phase = tuple[str, str, list[Any], dict[str, float]]  # server, workload, requests as sent, measured figures


def phase_requests(data: Path) -> list[Phase]:
    """Each phase's measured requests (warm-ups excluded) with their real send times and lengths, and the figures
    measured on them; no requests and no figures where the client was stopped before it wrote its records."""
    import pyarrow.parquet as pq

    from tuner.load.records import Request

    out: list[Phase] = []
    for s in SERVERS:
        for w, sub_dir in (("random", "bench"), ("dynamic", "bench_dynamic")):
            path = data / s / sub_dir / "records.parquet"
            if not path.exists():  # the data folder's README says why
                out.append((s, w, [], {}))
                continue
            rows = [r for r in pq.read_table(path).to_pylist() if not r["error"] and not r["warmup"]]
            t0 = min(r["sent_s"] for r in rows)
            reqs = [Request(i, r["sent_s"] - t0, r["input_len"], r["output_len"]) for i, r in enumerate(rows)]
            out.append((s, w, reqs, real_figures(rows)))
    return out


def recorded(data: Path) -> list[Phase]:
    """The phases whose client wrote its records."""
    return [ph for ph in phase_requests(data) if ph[2]]


def simulated(card: str, terms: SGLangTerms, reqs: list[Any]) -> dict[str, float]:
    from tuner.sim.reference import figures

    return figures(cs.engine(cs.TRITON_BF16, terms, card).run(reqs))


def replay(card: str, terms: SGLangTerms, label: str, data: Path | None = None) -> None:
    """phase_requests through the simulator on `card` with `terms`: sim/real and |error| %. With the committed terms
    on an H100 this is held out twice over: SGLang's terms were fitted on H200 logs and studies only, and nothing was
    fitted on these runs."""
    print(f"replayed through the simulator ({card}, {label}; sim/real, |error| %):")
    print("  phase           " + " ".join(f"{k.replace('_ms', ''):>22s}" for k in SHOW))
    errs: list[list[float]] = []
    for s, w, reqs, real in phase_requests(data or DATA):
        if not reqs:
            print(f"  {s:7s} {w:8s} no records")
            continue
        sim = simulated(card, terms, reqs)
        e = [abs(sim[k] / real[k] - 1) * 100 for k in SHOW]
        errs.append(e)
        print(f"  {s:7s} {w:8s}" + " ".join(f"{sim[k]:8.1f}/{real[k]:8.1f} {x:3.0f}%" for k, x in zip(SHOW, e,
                                                                                                  strict=True)))
    med = np.median(np.array(errs), axis=0)
    print("  median |error| %: " + " ".join(f"{k.replace('_ms', '')}={m:.1f}" for k, m in zip(SHOW, med, strict=True)))


def phase_errors(card: str, terms: SGLangTerms, phases: list[Phase]) -> list[dict[str, float]]:
    """|error| % of every figure per phase, the phases replayed on `card` with `terms`."""
    out = []
    for _, _, reqs, real in phases:
        sim = simulated(card, terms, reqs)
        out.append({k: abs(sim[k] / real[k] - 1) * 100 for k in SHOW})
    return out


def error_table(card: str, label: str, terms: SGLangTerms, phases: list[Phase]) -> list[dict[str, float]]:
    """phase_errors, printed per phase and as medians."""
    errs = phase_errors(card, terms, phases)
    print(f"  {label}:")
    for (s, w, _, _), e in zip(phases, errs, strict=True):
        print(f"    {s:7s} {w:8s} " + " ".join(f"{k.replace('_ms', '')}={e[k]:5.1f}" for k in SHOW))
    print("    median   " + " ".join(f"{k.replace('_ms', '')}={statistics.median(e[k] for e in errs):5.1f}"
                                      for k in SHOW))
    return errs


def tpot_rule(old: list[dict[str, float]], new: list[dict[str, float]], scope: str) -> bool:
    """The H100 rules' ship test: the median P50 and P99 TPOT |error| over the judged phases each drop by >= 10
    points from `old` to `new`, and no `scope` (a judged phase) reads more than 10 % under `new`; printed."""
    drops = {k: statistics.median(o[k] for o in old) - statistics.median(n[k] for n in new) for k in TPOT}
    worst = max(n[k] for n in new for k in TPOT)
    ships = all(d >= 10.0 for d in drops.values()) and worst <= 10.0
    print(f"rule: median drop P50 TPOT {drops['p50_tpot_ms']:.1f} / P99 TPOT {drops['p99_tpot_ms']:.1f} points "
          f"(each >= 10), worst {scope} TPOT |error| {worst:.1f} % (<= 10): {'ships' if ships else 'does not ship'}")
    return ships


def main() -> None:
    r: dict[tuple[str, str], float] = {}
    got: dict[tuple[str, str], list[Sample]] = {}
    eng = base_engine(gpu())
    print(f"card: {gpu()}")
    replay(gpu(), SGLANG_FITTED, "SGLANG_FITTED, the H200's terms")
    print("phase            n   batch  ctx/seq  step ms  residual ms (over the committed step without step_extra_s)")
    for s in SERVERS:
        by_workload = phase_samples(DATA / s)
        for w in WORKLOADS:
            samples = by_workload.get(w, [])
            if len(samples) < MIN_INTERVALS:
                print(f"{s:7s} {w:8s} {len(samples):3d}  too few clean intervals: not counted")
                continue
            a = np.array(samples)
            got[(s, w)] = samples
            r[(s, w)] = residual_ms(eng, samples)
            print(f"{s:7s} {w:8s} {len(a):3d} {np.median(a[:, 0]):6.1f} {np.median(a[:, 1] / a[:, 0]):8.0f} "
                  f"{np.median(a[:, 2]) * 1e3:8.2f} {r[(s, w)]:8.2f}")
    if len(r) < len(SERVERS) * len(WORKLOADS):
        print("verdict: not decided (a phase is missing)")
        return
    for s in SERVERS:
        print(f"W on {s}: r(dynamic) - r(random) = {r[(s, 'dynamic')] - r[(s, 'random')]:+.2f} ms")
    for w in WORKLOADS:
        print(f"C on {w}: r(ctx16k) - r(ctxdef) = {r[('ctx16k', w)] - r[('ctxdef', w)]:+.2f} ms")
    v = verdict(r)
    print(f"verdict: {v}")
    if v.startswith("W"):
        c0, c1 = fit_w_form(eng, got)
        replay(gpu(), w_terms(c0, c1), "the W form: in-sample, fitted on these runs' decode intervals")
        judge(c0, c1)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        DATA = Path(sys.argv[1]).resolve()
    main()
