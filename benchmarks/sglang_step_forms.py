"""Does SGLang's extra decode-step time follow the batch or the context it runs? (issue 17; a diagnostic, fits nothing
into the calibration).

SGLang's fixed per-step term (`step_extra_s`, tuner/sim/calibration.py SGLANG_FITTED) is ~2 ms on the decode log of
servetune's dynamic-mix studies and ~0.4 ms on the 2048/512 rate sweep and on the round-7 flag runs, whose server
flags and client were shown not to matter (docs/sim.md, SGLang). The two sets differ in workload (dynamic mix: 300 to
6,000+ token prompts, so ~5k context tokens per running sequence; the sweep ~2.2k) and in the host. If the extra
time were the triton decode kernel's latency per sequence (split-KV with at most 8 splits: a long sequence's splits
run longer while few sequences leave SMs idle), it would grow with context per sequence and one linear form would fit
both sets. This script tests that on the logs' clean decode intervals (benchmarks/calibrate_sglang.py's
`decode_lines`: batch size, context tokens, seconds per step): the residual of each interval over the committed SGLang
step with `step_extra_s` = 0 is regressed on each form, fitted on one set and scored on every set (median |error| of
the whole step, %).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sglang_step_forms.py

Output: benchmarks/results/sim/sglang_step_forms.txt.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_sglang as cs  # noqa: E402

from tuner.sim.calibration import SGLANG_FITTED  # noqa: E402

FLAGS = ROOT / "benchmarks/reference/h200-sglang-0.5.17-flags"
Sample = tuple[float, float, float]  # mean batch size, context tokens, seconds per decode step
Form = tuple[str, list[Callable[[np.ndarray], np.ndarray]]]
FORMS: list[Form] = [
    ("constant", []),
    ("+ context per sequence", [lambda a: a[:, 1] / a[:, 0] / 1e3]),
    ("+ context", [lambda a: a[:, 1] / 1e3]),
    ("+ context per sequence + context", [lambda a: a[:, 1] / a[:, 0] / 1e3, lambda a: a[:, 1] / 1e3]),
    ("+ context per sequence + batch", [lambda a: a[:, 1] / a[:, 0] / 1e3, lambda a: a[:, 0]]),
]


def flag_samples(folder: str) -> list[Sample]:
    with gzip.open(FLAGS / folder / "batches.log.gz", "rt") as f:
        return cs.decode_lines(f, "")[0]


def sets() -> dict[str, list[Sample]]:
    alone, t1 = cs.decode_samples(cs.ALONE), cs.decode_samples(cs.JOINT_T1)
    return {"studies (fit: t0 @6, t1 @6, @12)": alone[0] + t1[0] + t1[1], "study t1 @9": t1[2],
            "sweep (3-6 req/s)": cs.sweep_decode_samples(), "flags C (servetune launch, 6 req/s)":
            flag_samples("C_servetune"), "flags A (the sweep's launch)": flag_samples("A_sweepflags")}


def design(a: np.ndarray, cols: list[Callable[[np.ndarray], np.ndarray]]) -> np.ndarray:
    return np.column_stack([np.ones(len(a))] + [f(a) for f in cols])


def main() -> None:
    eng = cs.engine(cs.TRITON_BF16, cs.without_step_terms(SGLANG_FITTED))
    data = {k: (np.array(s), cs.predicted(eng, s)) for k, s in sets().items()}
    print("clean decode intervals per set (medians): batch, context per sequence, step ms, residual over the committed "
          "SGLang step without step_extra_s, ms")
    for k, (a, pred) in data.items():
        print(f"  {k:38s} n={len(a):3d} batch={np.median(a[:, 0]):5.1f} ctx/seq={np.median(a[:, 1] / a[:, 0]):6.0f} "
              f"step={np.median(a[:, 2]) * 1e3:5.2f} residual={np.median(a[:, 2] - pred) * 1e3:5.2f}")
    fit_on = ["studies (fit: t0 @6, t1 @6, @12)", "sweep (3-6 req/s)", "flags C (servetune launch, 6 req/s)"]
    print("median |error| of the step, % (columns: the sets above), per form (residual in ms = coefficients x "
          "[1, terms in k tokens or sequences]) and fit set:")
    for name, cols in FORMS:
        for src in [*fit_on, "all sets"]:
            keys = list(data) if src == "all sets" else [src]
            x = np.concatenate([design(data[k][0], cols) for k in keys])
            y = np.concatenate([(data[k][0][:, 2] - data[k][1]) * 1e3 for k in keys])
            beta, *_ = np.linalg.lstsq(x, y, rcond=None)
            errs = []
            for a, pred in data.values():
                step = pred * 1e3 + design(a, cols) @ beta
                errs.append(float(np.median(np.abs(step / (a[:, 2] * 1e3) - 1)) * 100))
            print(f"  {name:34s} fit on {src:38s} coef={np.array2string(beta, precision=3):28s} "
                  + " ".join(f"{e:5.1f}" for e in errs))
    print("residual by batch size (median ms, n): is the studies' extra time their drain's small batches?")
    bins = [(0.0, 2.5), (2.5, 5.0), (5.0, 8.0), (8.0, 16.0), (16.0, 1e9)]
    print("  " + " " * 38 + "".join(f"{f'[{lo:g},{hi:g})' if hi < 1e9 else f'>={lo:g}':>14s}" for lo, hi in bins))
    for k, (a, pred) in data.items():
        res = (a[:, 2] - pred) * 1e3
        cells = []
        for lo, hi in bins:
            m = (a[:, 0] >= lo) & (a[:, 0] < hi)
            cells.append(f"{np.median(res[m]):6.2f} ({int(m.sum()):3d})" if m.any() else f"{'-':>6s} (  0)")
        print(f"  {k:38s}" + "".join(f"{c:>14s}" for c in cells))


if __name__ == "__main__":
    main()
