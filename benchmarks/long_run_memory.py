"""Does a long run keep the driver's memory bounded? An hour of simulated traffic through the real client.

The sim server (`python -m tuner.sim.server`, started through the same ServerProcess as a trial) runs
`--time-scale` times faster than real time; servetune's streaming client (HttpTarget, in this
process) sends `--rate` requests per simulated second, scaled by the same factor, in consecutive
windows of `--window-min` simulated minutes (like the load points of a long capacity search), and
each window's records stream to a Parquet file the way a trial writes requests.parquet.

After 10 simulated minutes and again after 60 it prints this process's peak resident memory
(VmHWM from /proc/self/status: it only ever grows), so a leak per request or per window shows as
B >> A. The sim server's own peak is printed too.

    python benchmarks/long_run_memory.py [--minutes 60] [--rate 1.0] [--time-scale 60] [--window-min 5]
Last line: peak_rss_mb_10min=A peak_rss_mb_60min=B
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.engines import get_engine  # noqa: E402 - after the path set-up, as a script
from tuner.engines.base import LaunchSpec  # noqa: E402
from tuner.engines.process import reserve_port  # noqa: E402
from tuner.load.records_io import RecordWriter  # noqa: E402
from tuner.load.target import HttpTarget  # noqa: E402
from tuner.load.workload import generate  # noqa: E402
from tuner.spec.study import ModelSpec, SimSettings  # noqa: E402
from tuner.spec.workload import Workload  # noqa: E402


def status_mb(field: str, pid: str = "self") -> float:
    """A memory line of /proc/<pid>/status (VmHWM: peak resident, VmRSS: now), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60, help="simulated minutes of traffic")
    ap.add_argument("--rate", type=float, default=1.0, help="requests per simulated second")
    ap.add_argument("--time-scale", type=float, default=60, help="simulated seconds per wall second")
    ap.add_argument("--window-min", type=float, default=5, help="simulated minutes per client run")
    ap.add_argument("--output-len", type=int, default=16)
    a = ap.parse_args()

    workload = Workload.model_validate({
        "classes": [
            {"name": "chat", "weight": 3, "input": {"dist": "normal", "mean": 320, "std": 120, "min": 16, "max": 800},
             "output": {"dist": "fixed", "value": a.output_len}},
            {"name": "code", "weight": 2, "input": {"dist": "normal", "mean": 1024, "std": 600, "min": 16,
                                                      "max": 3000}, "output": {"dist": "fixed", "value": a.output_len}},
        ],
        "warmup_requests": 0,
    })
    tmp = Path(tempfile.mkdtemp(prefix="long-run-"))
    model = ModelSpec(name="Qwen/Qwen3-0.6B", served_name="long-run", max_model_len=4096)
    port, sock = reserve_port()
    launch = LaunchSpec(model=model, host="127.0.0.1", port=port, log_path=tmp / "engine.log",
                        settings=SimSettings(mode="server", time_scale=a.time_scale), port_socket=sock)
    per_window = max(1, round(a.rate * a.window_min * 60))
    windows = math.ceil(a.minutes / a.window_min)
    wall_rate = a.rate * a.time_scale
    print(f"{a.minutes:g} simulated minutes at {a.rate:g} req/s: {windows} windows of {per_window} requests, "
          f"{wall_rate:g} req/s wall (time scale {a.time_scale:g})", flush=True)
    peak_10 = float("nan")
    sent = failed = 0
    t_start = time.monotonic()
    with get_engine("sim").server({}, launch) as srv:
        target = HttpTarget(srv.base_url, model.client_name, timeout_s=60)
        for w in range(windows):
            requests = generate(workload, n=per_window, rate=wall_rate, seed=w, max_model_len=4096)
            with RecordWriter(tmp / f"window-{w:03d}.parquet") as writer:
                records = target.run(requests, sink=writer.write)
            sent += len(records)
            failed += sum(not r.ok for r in records)
            del records
            gc.collect()
            done_min = (w + 1) * a.window_min
            print(f"  {done_min:5.0f} min: {sent} requests ({failed} failed), rss {status_mb('VmRSS'):.1f} MiB, "
                  f"peak {status_mb('VmHWM'):.1f} MiB, server peak {status_mb('VmHWM', str(srv.pid)):.1f} MiB",
                  flush=True)
            if done_min <= 10:
                peak_10 = status_mb("VmHWM")
        server_peak = status_mb("VmHWM", str(srv.pid))
    peak_60 = status_mb("VmHWM")
    print(f"wall {time.monotonic() - t_start:.0f} s; sim server peak rss {server_peak:.1f} MiB; "
          f"records in {tmp}", flush=True)
    print(f"peak_rss_mb_10min={peak_10:.1f} peak_rss_mb_60min={peak_60:.1f}")


if __name__ == "__main__":
    main()
