"""Runs inside AIConfigurator's own venv (not servetune's): one aggregated estimate per grid entry.

Input (JSON on stdin): {"model_path": dir with config.json, "system": "h200_sxm", "backend": "vllm",
"grid": [[isl, osl, batch_size, ctx_tokens], ...], "cache": path}. Each entry is one
`aiconfigurator.cli.api.cli_estimate(mode="agg")` (in-flight batching at a fixed concurrency); results
are appended to `cache` (JSON lines) as they come, so an interrupted run keeps what it had, and entries
already there are not estimated again. Prints the number of new estimates. Called by
benchmarks/sim_vs_aiconfigurator.py; needs only the `aiconfigurator` package.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path


def main() -> None:
    from aiconfigurator.cli.api import cli_estimate

    spec = json.load(sys.stdin)
    cache = Path(spec["cache"])
    done = set()
    if cache.exists():
        done = {tuple(json.loads(line)["key"]) for line in cache.read_text().splitlines() if line.strip()}
    new = 0
    for isl, osl, bs, ctx in spec["grid"]:
        if (isl, osl, bs, ctx) in done:
            continue
        with contextlib.redirect_stdout(io.StringIO()):  # its report table
            r = cli_estimate(spec["model_path"], spec["system"], mode="agg", backend_name=spec["backend"],
                             isl=isl, osl=osl, batch_size=bs, ctx_tokens=ctx, tp_size=1)
        raw = r.raw
        row = {"key": [isl, osl, bs, ctx], "ttft_ms": float(r.ttft), "tpot_ms": float(r.tpot),
               "latency_ms": float(raw["request_latency"]), "tokens_s": float(raw["tokens/s"]),
               "seq_s": float(raw["seq/s"]), "version": str(raw.get("version", ""))}
        with cache.open("a") as f:
            f.write(json.dumps(row) + "\n")
        new += 1
    print(new)


if __name__ == "__main__":
    main()
