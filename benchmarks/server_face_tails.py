"""The server face against the virtual face on the same sends: percentiles, tails included.

Why: the server face (`python -m tuner.sim.server`, `sim: {mode: server}`) was checked on throughput, P50 TTFT and
P50 TPOT (docs/sim.md "The server"), not on the tails that the simulator's calibration work is about. Until
2026-12-06 its live loop (tuner/sim/live.py) handed tokens out at each step's GPU end after the API server's fixed
latency and read TTFT and ITL tails 35-83 % low; it now takes the virtual face's arrival path (the API server's FIFO,
the one-step-ahead gate) and hands tokens out at each step's output time. This prints how far apart the two faces
read one workload: Poisson arrivals, Qwen3-8B and Qwen3-1.7B shapes on an H200, engine defaults, time scale 1 and 2.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/server_face_tails.py   # output results/sim/server_face_tails.txt
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_fidelity import SHORT
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.process import reserve_port
from tuner.load.records import Request, RequestRecord
from tuner.load.target import HttpTarget
from tuner.sim import SimulatedEngine
from tuner.sim.reference import figures
from tuner.spec.study import ModelSpec, SimSettings

CASES = (("Qwen/Qwen3-8B", "qwen3-8b", 4.0, 1000, 128), ("Qwen/Qwen3-1.7B", "qwen3-1.7b", 12.0, 1000, 128))
SCALES = (1.0, 2.0)
N = 150


def show(label: str, recs: list[RequestRecord], ref: dict[str, float] | None = None) -> dict[str, float]:
    """One row: the records' figures (tuner.sim.reference.figures, as `vllm bench serve` reports them), and with
    `ref` each one's signed difference from it."""
    f = figures(recs)
    cells = [f"ok {sum(r.ok for r in recs)}"]
    for k, v in f.items():
        cells.append(f"{SHORT[k]} {v:.1f}" + (f" ({(v - ref[k]) / ref[k] * 100:+.0f}%)" if ref is not None else ""))
    print(f"  {label:18s} " + "  ".join(cells), flush=True)
    return f


def main() -> None:
    for model, shape, rate, inp, out in CASES:
        rng = np.random.default_rng(0)
        arrivals = np.cumsum(rng.exponential(1 / rate, N))
        reqs = [Request(i, float(arrivals[i]), inp, out) for i in range(N)]
        print(f"{shape} H200, engine defaults, {N} Poisson requests at {rate:g} req/s, {inp} in / {out} out (ms)")
        virtual = show("virtual face", SimulatedEngine(flavour="vllm", gpu="H200", shape=shape, args={},
                                                       max_model_len=4096).run(reqs))
        for scale in SCALES:
            port, sock = reserve_port()
            with tempfile.TemporaryDirectory() as tmp:
                launch = LaunchSpec(model=ModelSpec(name=model, served_name="m", max_model_len=4096),
                                    host="127.0.0.1", port=port, log_path=Path(tmp) / "sim.log",
                                    settings=SimSettings(flavour="vllm", gpu="H200", mode="server", time_scale=scale),
                                    port_socket=sock)
                with get_engine("sim").server({}, launch) as srv:
                    served = HttpTarget(srv.base_url, "m", time_scale=scale, scrape_metrics=False).run(reqs)
            show(f"server face x{scale:g}", served, virtual)


if __name__ == "__main__":
    main()
