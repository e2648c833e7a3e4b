"""SGLang's decode step on the H200, from a batch probe like the H100's (issue 17).

On the H200 the simulator's SGLang terms (SGLANG_FITTED) were fitted on the decode log of servetune's dynamic-mix
studies; on the lead's 2048/512 rate sweep (benchmarks/reference/h200-sglang-0.5.17-sweep, never fitted on) they read
P50 TPOT ~39 % slow. On the H100 a batch probe (benchmarks/sglang_batch_probe.py: B requests at once per phase, so
the server decodes a batch of B with no prefill between its log lines) gave decode terms that held on workload runs
it never saw, the dynamic mix's included (SGLANG_FITTED_H100: a fixed decode time, a time per context token per
sequence, and the KV read's efficiency). This script makes the same probe's fit on an H200 and judges it on the H200's
SGLang data, none of which the probe saw.

Data: benchmarks/reference/h200-sglang-0.5.17-batch-probe/ (the H100 probe's command and phases, on an H200:
`scripts/h200/sglang_flags.sh probe --attention-backend triton --enable-metrics`, WORKLOADS probe-1-2048 ... probe-1-6000).

RULE (fixed and committed before the run):
  Fit, on the probe's clean decode intervals only: sglang_batch_probe.py's fit (`probe_terms`) with the H200's cost
    model: step = the committed SGLang step without `step_extra_s` and without KV reads + a + k x total context + b x
    context per sequence; the H200 terms are SGLANG_FITTED with `triton_decode_s` = a, `triton_kv_seq_s` = b and
    `triton_e_kv` from k; prefill steps keep the committed terms.
  Judge, against the committed terms, on nine points: the sweep's three (replayed with their send times) and the six
    SGLang triton points of the H200 studies (h200-sglang-dynamic t0 @6; h200-joint-dynamic t1 @6 / @9 / @12 and the
    FP8 t3 @6 / @12; each re-run as its study ran it). The H200 terms ship (for SGLang on the H200 only) only if
    1. the sweep's median |error| of P50 TPOT and of P99 TPOT each drop by >= 15 points;
    2. over the six study points the median |error| of P50 TPOT and of P99 TPOT are each <= 10 %, and no study point's
       P50 or P99 TPOT |error| exceeds 15 %;
    3. over all nine, the tok/s median |error| is not worse by more than 1 point and the P99 TTFT median not worse by
       more than 3 points.
  Otherwise the H200 keeps SGLANG_FITTED, and the output says which parts failed.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sglang_batch_probe_h200.py

Output: benchmarks/results/sim/sglang_batch_probe_h200.txt.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_sglang as cs  # noqa: E402
import sglang_batch_probe as bp  # noqa: E402

from tuner.sim.calibration import SGLANG_FITTED  # noqa: E402
from tuner.sim.reference import STUDY_SETS, simulate_study_point, study_points  # noqa: E402
from tuner.sim.sglang_cost import SGLangTerms  # noqa: E402

DATA = ROOT / "benchmarks/reference/h200-sglang-0.5.17-batch-probe"
CARD = "H200"
FIGS = ("output_throughput", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
Errors = dict[str, float]


def judged(terms: SGLangTerms, label: str) -> tuple[list[Errors], list[Errors]]:
    """(the sweep's errors, the six study points' errors) with `terms`, printed."""
    print(f"{label}:")
    sweep = []
    for stem, _, sim, real in cs.sweep_points(cs.SWEEP, terms):
        sweep.append({f: abs(sim[f] / real[f] - 1) * 100 for f in FIGS})
        print(f"  sweep {stem:22s} " + " ".join(f"{f}={sim[f]:.1f}/{real[f]:.1f} {sweep[-1][f]:.0f}%" for f in FIGS))
    studies = []
    for sp in [sp for results, study in STUDY_SETS for sp in study_points(results, study) if sp.engine == "sglang"]:
        sim, real = simulate_study_point(sp, sglang_terms=terms), dict(sp.real)
        studies.append({f: abs(sim[f] / real[f] - 1) * 100 for f in FIGS})
        print(f"  study {sp.name:44s} " + " ".join(f"{f}={sim[f]:.1f}/{real[f]:.1f} {studies[-1][f]:.0f}%"
                                                   for f in FIGS))
    return sweep, studies


def med(rows: list[Errors], f: str) -> float:
    return statistics.median(r[f] for r in rows)


def main() -> None:
    if not (DATA / bp.SERVER / "batches.log.gz").exists():
        print(f"no probe data in {DATA}")
        return
    got = bp.probe_samples(DATA)
    h200 = bp.probe_terms(got, CARD)
    bp.step_table(got, {"committed": SGLANG_FITTED, "H200 fit": h200}, CARD)
    old_sweep, old_studies = judged(SGLANG_FITTED, "committed terms (SGLANG_FITTED)")
    new_sweep, new_studies = judged(h200, "H200 probe terms")
    tp = ("p50_tpot_ms", "p99_tpot_ms")
    for name, rows in (("sweep", (old_sweep, new_sweep)), ("studies", (old_studies, new_studies)),
                       ("all nine", (old_sweep + old_studies, new_sweep + new_studies))):
        print(f"{name}: median |error| % committed -> H200 fit: "
              + " ".join(f"{f}={med(rows[0], f):.1f}->{med(rows[1], f):.1f}" for f in FIGS))
    r1 = all(med(old_sweep, f) - med(new_sweep, f) >= 15 for f in tp)
    r2 = all(med(new_studies, f) <= 10 for f in tp) and all(r[f] <= 15 for r in new_studies for f in tp)
    old_all, new_all = old_sweep + old_studies, new_sweep + new_studies
    r3 = (med(new_all, "output_throughput") <= med(old_all, "output_throughput") + 1
          and med(new_all, "p99_ttft_ms") <= med(old_all, "p99_ttft_ms") + 3)
    verdict = "ships" if r1 and r2 and r3 else "does NOT ship"
    print(f"rule: 1 {'met' if r1 else 'NOT met'}, 2 {'met' if r2 else 'NOT met'}, 3 {'met' if r3 else 'NOT met'}: "
          f"the H200 fit {verdict}")


if __name__ == "__main__":
    main()
