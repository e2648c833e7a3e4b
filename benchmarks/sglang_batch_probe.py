"""SGLang's decode step at the batch sizes its steady state runs, on an H100 (issue 17).

On the two H100 workload runs (benchmarks/reference/h100-sglang-0.5.17-workload*), the simulator's SGLang reads
P50 TPOT 20-38 % slow at 6 req/s. H100 terms fitted on run 1's prefill side did not close that
(benchmarks/calibrate_sglang_h100.py). The runs' clean decode intervals are all at batch ~8, from the start of a
phase, but at steady state ~50-60 sequences decode together, with prefills between every two log lines. This probe
times the decode step where the runs could not. One SGLang 0.5.17 server (triton, `--enable-metrics`, dummy
Qwen3-8B) is sent B requests of IN prompt tokens and 512 output tokens at once, for each `probe-B-IN` phase
(scripts/h200/sglang_flags.sh). Each phase then decodes a batch of B, with no prefill between its log lines.

RULE (fixed and committed before the run):
  Read: per phase, the clean decode intervals (benchmarks/calibrate_sglang.py's reading, split by the phase marks),
    and the step the simulator's H100 gives them with the committed terms.
  Fit, on the probe's intervals only: step = the committed SGLang step without `step_extra_s` and without KV reads
    + a + k x total context + b x context per sequence. From k comes `triton_e_kv` (as calibrate_sglang.decode_fit).
    The H100 terms are SGLANG_FITTED with `triton_decode_s` = a, `triton_kv_seq_s` = b and `triton_e_kv` from k.
    Prefill steps keep the committed `step_extra_s`, `triton_e_attn` and `e_lin`.
  Judge, on the seven recorded phases of the two workload runs (none of them fitted on), against the committed terms:
    the H100 terms ship (for SGLang on the H100 only) only if the median |error| over the seven phases of P50 TPOT
    and of P99 TPOT each drop by >= 10 points, and no phase's P50 or P99 TPOT |error| exceeds 10 %.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sglang_batch_probe.py

Output: benchmarks/results/sim/sglang_batch_probe.txt.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_sglang as cs  # noqa: E402
import sglang_workload_host as wh  # noqa: E402

from tuner.sim.calibration import SGLANG_FITTED, SGLANG_FITTED_H100  # noqa: E402
from tuner.sim.sglang_cost import SGLangTerms  # noqa: E402

DATA = ROOT / "benchmarks/reference/h100-sglang-0.5.17-batch-probe"
RUNS = (ROOT / "benchmarks/reference/h100-sglang-0.5.17-workload", ROOT / "benchmarks/reference/h100-sglang-0.5.17-workload-2")
SERVER = "probe"
CARD = "H100"
MIN_INTERVALS = 3


def probe_samples(data: Path = DATA) -> dict[str, list[wh.Sample]]:
    """Each probe phase's clean decode intervals, in the order the phases ran."""
    return {w: s for w, s in wh.phase_samples(data / SERVER).items() if w.startswith("probe-")}


def fit(samples: list[wh.Sample], card: str = CARD) -> tuple[float, float, float]:
    """(a s, b s per context token per sequence, triton_e_kv) by least squares over the probe's intervals."""
    base = cs.engine(cs.TRITON_BF16, cs.without_step_terms(SGLANG_FITTED), card)
    a = np.array(samples)
    y = a[:, 2] - (cs.predicted(base, samples) - base.cost.dec_b * a[:, 1])
    (c0, k, b), *_ = np.linalg.lstsq(np.c_[np.ones(len(a)), a[:, 1], a[:, 1] / a[:, 0]], y, rcond=None)
    return float(c0), float(b), float(base.cost.dec_b * base.cal.e_kv / k)


def step_table(got: dict[str, list[wh.Sample]], terms: dict[str, SGLangTerms], card: str = CARD) -> None:
    print("phase            n  batch ctx/seq  step ms  " + "  ".join(f"{k} ms (err %)" for k in terms))
    engines = {k: cs.engine(cs.TRITON_BF16, t, card) for k, t in terms.items()}
    for w, s in got.items():
        if len(s) < MIN_INTERVALS:
            print(f"{w:15s} {len(s):3d}  too few clean intervals")
            continue
        a = np.array(s)
        real = float(np.median(a[:, 2])) * 1e3
        cells = []
        for eng in engines.values():
            sim = float(np.median(cs.predicted(eng, s))) * 1e3
            cells.append(f"{sim:7.2f} ({(sim / real - 1) * 100:+5.1f})")
        print(f"{w:15s} {len(s):3d} {np.median(a[:, 0]):6.1f} {np.median(a[:, 1] / a[:, 0]):7.0f} {real:8.2f}  "
              + "  ".join(cells))


def probe_terms(got: dict[str, list[wh.Sample]], card: str) -> SGLangTerms:
    """SGLANG_FITTED with the decode terms fitted on a probe's intervals (the rule's fit), printed."""
    samples = [x for s in got.values() if len(s) >= MIN_INTERVALS for x in s]
    c0, b, e_kv = fit(samples, card)
    print(f"fit on {len(samples)} probe intervals ({card}): triton_decode_s = {c0 * 1e3:.3f} ms, triton_kv_seq_s = "
          f"{b * 1e6:.4f} ms per k tokens of context per sequence, triton_e_kv = {e_kv:.4f} "
          f"(committed {SGLANG_FITTED.triton_e_kv})")
    return dataclasses.replace(SGLANG_FITTED, triton_decode_s=c0, triton_kv_seq_s=b, triton_e_kv=e_kv)


def main() -> None:
    got = probe_samples()
    h100 = probe_terms(got, CARD)
    shipped = SGLANG_FITTED_H100
    same = all(np.isclose(getattr(shipped, k), getattr(h100, k), rtol=1e-5) for k in ("triton_decode_s",
                                                                                   "triton_kv_seq_s", "triton_e_kv"))
    print(f"in tuner/sim/calibration.py SGLANG_FITTED_H100: triton_decode_s={shipped.triton_decode_s} "
          f"triton_kv_seq_s={shipped.triton_kv_seq_s} triton_e_kv={shipped.triton_e_kv} "
          f"({'this fit' if same else 'NOT this fit'})")
    step_table(got, {"H200 terms": SGLANG_FITTED, "H100 fit": h100})
    phases = [(f"{i}:{s}", w, r, f) for i, run in enumerate(RUNS, 1) for s, w, r, f in wh.recorded(run)]
    print("the two workload runs' recorded phases (held out), |error| %:")
    old = wh.error_table(CARD, "H200 terms (SGLANG_FITTED)", SGLANG_FITTED, phases)
    wh.tpot_rule(old, wh.error_table(CARD, "H100 terms", h100, phases), "phase")


if __name__ == "__main__":
    main()
