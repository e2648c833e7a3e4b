"""How a held-out shape's points answer the API server's CPU split (issue 17): a diagnostic, never a fit.

Reads a calibration printed by benchmarks/sim_heat_refit.py (its "refit:" block), sets the API server's CPU per token
and per SSE chunk (tuner/sim/api_server.py, `stream_tok_s` / `stream_chunk_s`) to each given pair and prints, per
point of the shape, measured / simulated P50 and P99 TTFT, P50 and P99 TPOT and P99 ITL (ms). The held-out shape's
own data choose nothing here: it shows how sensitive those points are, next to what the 8B-only refit picked. A pair
0/0 leaves the API server off (each shape's committed floor terms, as sim_heat_refit.py checks them).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_api_sweep.py benchmarks/results/sim/sim_heat_refit_chunk.txt \
        qwen3-1.7b 30/70 60/50 80/40
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_heat_refit import onto
from benchmarks.sim_shape_cpu import shape_points
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.reference import measured, shape_calibration, simulate

SHOWN = ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p99_itl_ms")
INTS = ("api_passes", "sched_ahead")


def printed_calibration(path: Path) -> Calibration:
    """The last `Calibration(...)` block of a sim_heat_refit.py output ("committed": the committed fit)."""
    if str(path) == "committed":
        return FITTED
    body = path.read_text().split("Calibration(")[-1].split("\n)")[0]
    kw: dict[str, float | int] = {m[1]: float(m[2]) for m in re.finditer(r"(\w+)=([-0-9.e+]+)", body)}
    return Calibration(**{k: int(v) if k in INTS else v for k, v in kw.items()})  # type: ignore[arg-type]


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    fit, shape = printed_calibration(Path(sys.argv[1])), sys.argv[2]
    for pair in sys.argv[3:]:
        tok_us, chunk_us = (float(x) for x in pair.split("/"))
        cal = dataclasses.replace(fit, stream_tok_s=tok_us * 1e-6, stream_chunk_s=chunk_us * 1e-6,
                                  api_passes=fit.api_passes if tok_us else 0)
        for p in shape_points(shape):
            real, sim = measured(p), simulate(p, onto(shape_calibration(shape), cal))
            print(f"{pair:>7} {p.name:<28} " + " ".join(f"{k[:-3]} {real[k]:.1f}/{sim[k]:.1f}" for k in SHOWN))


if __name__ == "__main__":
    main()
