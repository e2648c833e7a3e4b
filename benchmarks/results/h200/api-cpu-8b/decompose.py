"""Where Qwen3-8B's TTFT goes under load, and the API server's CPU per streamed token (issue 17).

Reads this folder's files (probe6.sh on the H200): the bench results, the server's /metrics text before and after each
rate (metrics_q8load.tar.gz: the engine's own histograms, whose sums and counts give exact means) and every thread's
CPU time every 0.5 s (cpu_samples.jsonl.gz; API server pid 708, engine core pid 840: the server log).

    python3 benchmarks/results/h200/api-cpu-8b/decompose.py
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import tarfile
from pathlib import Path

HERE = Path(__file__).parent
RATES = {12: (1, 2), 8: (3, 4), 4: (5, 6)}  # snapshot numbers before / after each rate
API, ENGINE = "708", "840"
HISTS = ("time_to_first_token", "request_queue_time", "request_prefill_time")


def snapshots() -> dict[int, tuple[float, dict[str, float]]]:
    """Snapshot number -> (time, summed value of every metric line over its labels)."""
    out = {}
    with tarfile.open(HERE / "metrics_q8load.tar.gz") as tar:
        for m in tar.getmembers():
            lines = tar.extractfile(m).read().decode().splitlines()  # type: ignore[union-attr]
            vals: dict[str, float] = {}
            for line in lines[1:]:
                hit = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)", line)
                if hit:
                    vals[hit.group(1)] = vals.get(hit.group(1), 0.0) + float(hit.group(3))
            out[int(m.name.rsplit("_", 1)[1].split(".")[0])] = (float(lines[0].split("=")[1]), vals)
    return out


def main() -> None:
    snaps = snapshots()
    rows = [json.loads(line) for line in gzip.open(HERE / "cpu_samples.jsonl.gz", "rt")]
    times = [r["t"] for r in rows]

    def cpu(t: float, pid: str, main_only: bool) -> float:
        row = rows[min(bisect.bisect_left(times, t), len(rows) - 1)]
        return sum(v for k, v in row["cpu"].items() if (k == f"{pid}/{pid}/python3" if main_only else k.startswith(pid + "/")))

    print("rate  client TTFT  server TTFT  queue  prefill  | client-server  server-queue-prefill   (means, ms)")
    for rate, (a, b) in RATES.items():
        (_, m0), (_, m1) = snaps[a], snaps[b]
        mean = {h: (m1[f"vllm:{h}_seconds_sum"] - m0[f"vllm:{h}_seconds_sum"])
                / (m1[f"vllm:{h}_seconds_count"] - m0[f"vllm:{h}_seconds_count"]) * 1e3 for h in HISTS}
        client = json.loads((HERE / f"bench_q8load_r{rate}.json").read_text())["mean_ttft_ms"]
        ttft, queue, prefill = (mean[h] for h in HISTS)
        print(f"{rate:4d}  {client:11.1f}  {ttft:11.1f}  {queue:5.1f}  {prefill:7.1f}  | {client - ttft:13.1f}"
              f"  {ttft - queue - prefill:20.1f}")
    print("rate  window s  tokens/s  API main thread share  us/token (main)  us/token (all API threads)  engine core share")
    for rate, (a, b) in RATES.items():
        (t0, m0), (t1, m1) = snaps[a], snaps[b]
        toks = m1["vllm:generation_tokens_total"] - m0["vllm:generation_tokens_total"]
        main = cpu(t1, API, True) - cpu(t0, API, True)
        whole = cpu(t1, API, False) - cpu(t0, API, False)
        eng = cpu(t1, ENGINE, False) - cpu(t0, ENGINE, False)
        dt = t1 - t0
        print(f"{rate:4d}  {dt:8.1f}  {toks / dt:8.0f}  {main / dt:21.2f}  {main / toks * 1e6:15.0f}"
              f"  {whole / toks * 1e6:26.0f}  {eng / dt:17.2f}")


if __name__ == "__main__":
    main()
