"""CPU share (CPU-seconds per second, one core = 1.0) of the vLLM API server (pid 676 in this run), its engine core
(pid 803) and the benchmark client (pid 1130), per 2 s window, from cpu_samples.jsonl.gz (pids: the server log).

    python3 benchmarks/results/h200/api-cpu/summarize.py
"""

import gzip
import json
import time
from pathlib import Path

WHO = {"676": "api_server", "803": "engine_core", "1130": "bench_client"}
rows = [json.loads(line) for line in gzip.open(Path(__file__).with_name("cpu_samples.jsonl.gz"), "rt")]
print("window (UTC)  " + "  ".join(f"{w:>12s}" for w in WHO.values()) + "   api main thread")
for a, b in zip(rows[::4], rows[4::4], strict=False):
    dt = b["t"] - a["t"]
    share = dict.fromkeys(WHO, 0.0)
    for k, v in b["cpu"].items():
        pid = k.split("/")[0]
        if pid in share:
            share[pid] += (v - a["cpu"].get(k, 0.0)) / dt
    main = (b["cpu"].get("676/676/python3", 0.0) - a["cpu"].get("676/676/python3", 0.0)) / dt
    if time.strftime("%H:%M:%S", time.gmtime(a["t"])) >= "08:06:44":
        print(time.strftime("%H:%M:%S", time.gmtime(a["t"])) + "      "
              + "  ".join(f"{share[p]:12.2f}" for p in WHO) + f"   {main:.2f}")
