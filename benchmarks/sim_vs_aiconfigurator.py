"""The same real H200 points through AIConfigurator and servetune's simulator: both errors, per metric.

Points: every Qwen3-8B-shaped reference point of tuner/sim/reference.py (real vLLM 0.26.0, one H200,
2048 in / 512 out; one AIConfigurator model per run, so the Qwen3-14B set is left out here). AIConfigurator (PyPI `aiconfigurator`, its vLLM perf database for
h200_sxm) runs in its own venv (`--aic-python`; it pins other versions than servetune), through
benchmarks/aic_estimate.py: aggregated in-flight-batching estimates at fixed concurrencies, for each
engine's `max_num_batched_tokens` as its context-token budget. It models a closed loop (a fixed number
of requests in flight), so an open-loop point at rate r is read where its own Little's law holds
(concurrency c with c / latency(c) = r, interpolated between grid sizes); a saturation point (all
requests at once) at the batch the engine holds (max_num_seqs, capped by prompts and by KV capacity).
It reports mean TTFT and TPOT only, compared here with the measured P50s; it has no P99 or ITL.
The simulator is run exactly as benchmarks/sim_fidelity.py runs it.

    .venv/bin/python benchmarks/sim_vs_aiconfigurator.py [--aic-python /tmp/simtails/aic/bin/python]

If AIConfigurator cannot be run, says why, prints the simulator's errors alone and exits 3.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.sim.catalog import ModelShape, get_shape
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import ALL_POINTS, RefPoint, errors_pct, measured, simulate, split_of

HERE = Path(__file__).resolve().parent
GRID_BS = (8, 16, 32, 48, 64, 96, 128, 192, 256, 320)
COMPARED = {  # metric: what AIConfigurator reports for it (None = nothing)
    "output_throughput": "tokens_s", "p50_ttft_ms": "ttft_ms", "p50_tpot_ms": "tpot_ms",
    "p99_ttft_ms": None, "p99_tpot_ms": None, "p99_itl_ms": None,
}
SHORT = {"output_throughput": "tok/s", "p50_ttft_ms": "TTFT50", "p50_tpot_ms": "TPOT50", "p99_ttft_ms": "TTFT99",
         "p99_tpot_ms": "TPOT99", "p99_itl_ms": "ITL99"}


def hf_config(shape: ModelShape) -> dict[str, object]:
    """A Hugging Face config.json for a dense Qwen3 shape of the catalogue (what AIConfigurator reads)."""
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": shape.hidden,
            "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
            "num_key_value_heads": shape.kv_heads, "head_dim": shape.head_dim,
            "intermediate_size": shape.intermediate, "vocab_size": shape.vocab,
            "tie_word_embeddings": shape.tied_embeddings, "max_position_embeddings": shape.max_position,
            "torch_dtype": "bfloat16", "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1000000}


def engine_of(p: RefPoint) -> SimulatedEngine:
    return SimulatedEngine(flavour="vllm", gpu="H200", shape=p.shape, args=p.args, max_model_len=p.max_model_len)


def run_aic(python: str, points: list[RefPoint], cache: Path) -> str | None:
    """Fill the estimate cache; None when done, else why AIConfigurator could not run."""
    if not Path(python).exists():
        return f"no Python at {python}"
    probe = subprocess.run([python, "-c", "import aiconfigurator.cli.api"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`import aiconfigurator.cli.api` failed in {python}: {probe.stderr.strip().splitlines()[-1:]}"
    model_dir = Path(tempfile.mkdtemp(prefix="aic-model-"))
    (model_dir / "config.json").write_text(json.dumps(hf_config(get_shape(points[0].shape))))
    ctxs = sorted({engine_of(p).cfg["max_num_batched_tokens"] for p in points})
    grid = [[p.input_len, p.output_len, bs, ctx] for p in points[:1] for ctx in ctxs for bs in GRID_BS]
    spec = {"model_path": str(model_dir), "system": "h200_sxm", "backend": "vllm", "grid": grid, "cache": str(cache)}
    proc = subprocess.run([python, str(HERE / "aic_estimate.py")], input=json.dumps(spec), capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return f"aic_estimate.py exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    return None


def interp(rows: list[dict[str, float]], x_key: str, x: float, y_key: str) -> float:
    """Linear interpolation of y over x (rows sorted by x); clamped at the ends."""
    xs = [r[x_key] for r in rows]
    if x <= xs[0]:
        return rows[0][y_key]
    for a, b in zip(rows, rows[1:], strict=False):
        if a[x_key] <= x <= b[x_key]:
            f = (x - a[x_key]) / (b[x_key] - a[x_key]) if b[x_key] > a[x_key] else 0.0
            return a[y_key] + f * (b[y_key] - a[y_key])
    return rows[-1][y_key]


def aic_figures(p: RefPoint, table: dict[tuple[int, int, int, int], dict[str, float]]) -> dict[str, float]:
    eng = engine_of(p)
    ctx = eng.cfg["max_num_batched_tokens"]
    rows = sorted(({"bs": k[2], **v} for k, v in table.items() if k[3] == ctx and k[0] == p.input_len),
                  key=lambda r: r["bs"])
    if p.rate > 0:
        for r in rows:
            r["rate"] = r["bs"] / (r["latency_ms"] / 1e3)  # Little's law at that concurrency
        rows = [r for i, r in enumerate(rows) if all(r["rate"] > q["rate"] for q in rows[:i])]  # increasing part
        c = interp(rows, "rate", p.rate, "bs")
    else:
        c = min(eng.cfg["max_num_seqs"], p.prompts, eng.kv_capacity_tokens // (p.input_len + p.output_len))
        rows = sorted(rows, key=lambda r: r["bs"])
    return {m: interp(rows, "bs", c, k) for m, k in COMPARED.items() if k is not None} | {"concurrency": c}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic-python", default=os.environ.get("AIC_PYTHON", "/tmp/simtails/aic/bin/python"),
                    help="Python of a venv with `pip install aiconfigurator` (env AIC_PYTHON)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "servetune-aic-qwen3-8b-h200.jsonl",
                    help="AIConfigurator estimates for this model and GPU, kept between runs (JSON lines)")
    a = ap.parse_args()
    points = [p for p in ALL_POINTS if p.shape == "qwen3-8b"]  # the model AIConfigurator is given: one shape
    why = run_aic(a.aic_python, points, a.cache)
    table: dict[tuple[int, int, int, int], dict[str, float]] = {}
    version = ""
    if why is None:
        for line in a.cache.read_text().splitlines():
            row = json.loads(line)
            table[tuple(row.pop("key"))] = row  # type: ignore[index]
            version = row.pop("version", version)
        print(f"AIConfigurator: {a.aic_python}, vLLM perf database {version}, system h200_sxm, "
              f"{len(table)} grid estimates")
    else:
        print(f"AIConfigurator: UNAVAILABLE ({why}); install it in its own venv "
              "(python -m venv V && V/bin/pip install aiconfigurator) and pass --aic-python V/bin/python")
    errs: dict[str, dict[str, list[float]]] = {"sim": {m: [] for m in COMPARED}, "aic": {m: [] for m in COMPARED}}
    names = {p.name: p.name.replace("max_num_batched_tokens", "mbt").replace("max_num_seqs", "mns")
             .replace("h200-servetune", "st") for p in points}
    width = max(len(n) for n in names.values())
    print(f"{'point':{width}s} {'split':6s} " + " ".join(f"{SHORT[m] + ' real/sim/aic':>31s}" for m in COMPARED))
    for p in points:
        real, sim = measured(p), simulate(p)
        e_sim = errors_pct(sim, real)
        aic = aic_figures(p, table) if table else {}
        cells = []
        for m, k in COMPARED.items():
            errs["sim"][m].append(e_sim[m])
            if k is not None and aic:
                e_aic = abs(aic[m] - real[m]) / real[m] * 100.0
                errs["aic"][m].append(e_aic)
                cells.append(f"{real[m]:7.1f}/{sim[m]:7.1f}/{aic[m]:7.1f} {e_sim[m]:3.0f}%/{e_aic:3.0f}%")
            else:
                cells.append(f"{real[m]:7.1f}/{sim[m]:7.1f}/    n/a {e_sim[m]:3.0f}%/ n/a")
        print(f"{names[p.name]:{width}s} {split_of(p):6s} " + " ".join(cells))
    print("median absolute error % over all points (sim: fitted on FIT_SET; AIConfigurator: its own database, "
          "not fitted to these runs)")
    for m in COMPARED:
        s = statistics.median(errs["sim"][m])
        a_vals = errs["aic"][m]
        a_txt = f"{statistics.median(a_vals):.1f}" if a_vals else "n/a"
        print(f"  {SHORT[m]:7s} sim={s:.1f} aiconfigurator={a_txt}")
    held = [i for i, p in enumerate(points) if split_of(p) in ("args", "shape")]
    for m in COMPARED:
        s = statistics.median([errs["sim"][m][i] for i in held])
        a_vals = errs["aic"][m]
        a_txt = f"{statistics.median([a_vals[i] for i in held]):.1f}" if a_vals else "n/a"
        print(f"  held-out (args) {SHORT[m]:7s} sim={s:.1f} aiconfigurator={a_txt} ({len(held)} points)")
    if why is not None:
        sys.exit(3)
    if not all(math.isfinite(v) for v in errs["aic"]["p50_tpot_ms"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
