"""What servetune's own front door (`python -m tuner.run`) measured on H200s, from committed files only.

Reads every benchmarks/results/h200-<study>/ (rounds 1-2) and benchmarks/results/h200/<study>/ (round 3 on)
folder written back from the device (trials.parquet,
study.yaml, timing.json, promoted.yaml, deploy.json when a promoted app was served) and prints, per
study, each trial's SLA capacity and latencies, then one last line:

  tuned_vs_default_static=X tuned_vs_default_dynamic=Y tuned_vs_default_mixed=Z engines=...
  served_on_gpu=yes|no gpu_minutes_to_promoted=M

tuned_vs_default_<test>: best feasible SLA capacity / the baseline's (defaults), for the study of that
stress test (workload.profile in its study.yaml); where no single run has both, two runs of the same study
that differ only in the load grid are pooled (said in the output, with both brackets); `na` where no such
study is committed or a side has no capacity. A run cut off before its end gives no ratio of its own. Values this script cannot know are printed as `na`, never filled in.

    python benchmarks/h200_report.py [--results benchmarks/results]
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml

TESTS = ("static", "dynamic", "mixed")
SPEC_TBPS = 4.8  # H200 HBM3e, vendor datasheet
# Qwen3-8B: bytes one decode step streams (the embedding table is gathered, not streamed); FP8 (vLLM's online
# per-tensor quantisation) stores the 36 layers' linear weights in 1 byte, norms and lm_head stay bf16.
_LINEAR = 36 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 12288)
_OTHER = 36 * (2 * 4096 + 2 * 128) + 4096 + 151936 * 4096
_KV_TOKEN = 36 * 8 * 128 * 2  # elements of K and V per token


def decode_bandwidth(records: Path, fp8_weights: bool, fp8_kv: bool) -> dict[str, float]:
    """Memory bandwidth the decode steps of one load point used, from its per-request records: B = mean
    requests in decode (decode time / window), C = their mean context (prompt + half the output); a step
    reads the weights once plus B*C tokens of KV; steps/s = decode tokens/s / B. Prefill shares the steps,
    so this is a lower bound on what the decode kernels themselves reach."""
    rows = [r for r in pq.read_table(records).to_pylist() if not r["warmup"] and r["error"] is None
            and r["first_token_s"] is not None and r["done_s"] is not None]
    window = max(r["done_s"] for r in rows) - min(r["sent_s"] for r in rows)
    dec = [(r["done_s"] - r["first_token_s"], r["input_len"] + r["output_tokens"] / 2, r["output_tokens"]) for r in rows]
    busy = sum(d for d, _, _ in dec)
    b, ctx = busy / window, sum(d * c for d, c, _ in dec) / busy
    tok_s = sum(max(n - 1, 0) for _, _, n in dec) / window
    weights = _LINEAR * (1 if fp8_weights else 2) + _OTHER * 2
    step = weights + b * ctx * _KV_TOKEN * (1 if fp8_kv else 2)
    tbps = step * tok_s / b / 1e12
    return {"batch": b, "context": ctx, "decode_tok_s": tok_s, "step_gb": step / 1e9, "tbps": tbps,
            "share": tbps / SPEC_TBPS}


def load_study(folder: Path) -> dict | None:
    if not (folder / "trials.parquet").is_file() or not (folder / "study.yaml").is_file():
        return None
    study = yaml.safe_load((folder / "study.yaml").read_text())
    rows = pq.read_table(folder / "trials.parquet").to_pylist()
    timing = json.loads((folder / "timing.json").read_text()) if (folder / "timing.json").is_file() else {}
    deploy = json.loads((folder / "deploy.json").read_text()) if (folder / "deploy.json").is_file() else {}
    return {"folder": folder, "study": study, "rows": rows, "timing": timing, "deploy": deploy,
            "promoted": (folder / "promoted.yaml").is_file(), "finished": finished(folder)}


def finished(folder: Path) -> bool:
    """False when the driver log shows a study cut off before its end (no closing "N trials in" line:
    device time ran out); a folder without a driver log is taken as finished (rounds 1-2)."""
    log = folder / "driver.log"
    if not log.is_file():
        return True
    name = yaml.safe_load((folder / "study.yaml").read_text()).get("name", "")
    return any(line.startswith(f"study {name}: ") and " trials in " in line for line in log.read_text().splitlines())


def bounds(row: dict) -> tuple[float | None, float | None]:
    """(highest load that met the SLA, lowest load above it that missed): the capacity's bracket."""
    pts = json.loads(row.get("points_json") or "[]")
    met = [p["load"] for p in pts if p.get("feasible")]
    cap = max(met) if met else None
    above = [p["load"] for p in pts if not p.get("feasible") and (cap is None or p["load"] > cap)]
    return cap, (min(above) if above else None)


def config_text(row: dict) -> str:
    if row.get("baseline"):
        return "defaults (baseline)"
    args = json.loads(row.get("args_json") or "{}")
    return ", ".join(f"{k}={v}" for k, v in sorted(args.items())) or "defaults"


def metric(row: dict, new: str, old: str) -> float | None:
    """A trials.parquet metric under its current name, or the name older files used."""
    v = row.get(f"metric.{new}")
    return v if v is not None else row.get(f"metric.{old}")


def fmt(v: float | None, spec: str = ".1f") -> str:
    return "na" if v is None else format(v, spec)


def summarize(s: dict) -> dict:
    rows = s["rows"]
    mode = (s["study"].get("capacity") or {}).get("mode", "rate")
    unit = "concurrent requests" if mode == "concurrency" else "req/s"
    print(f"\n## {s['study'].get('name')} ({s['folder'].name}), workload {s['study']['workload'].get('profile')}, "
          f"capacity in {unit}")
    print(f"| trial | config | outcome | points ({unit}, x = missed) | capacity | bracket | out tok/s | "
          "P99 TTFT ms | P99 TPOT ms | P99 ITL ms | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["number"]):
        pts = json.loads(r.get("points_json") or "[]")
        seq = " ".join(f"{p['load']:g}{'' if p.get('feasible') else 'x'}" for p in pts)
        lo, hi = bounds(r)
        print(f"| {r['trial_id']} | {config_text(r)} | {r['outcome']} | {seq} | {fmt(r.get('capacity'), 'g')} | "
              f"[{fmt(lo, 'g')}, {fmt(hi, 'g')}) | {fmt(r.get('objective'), ',.0f')} | "
              f"{fmt(metric(r, 'p99_ttft_ms', 'ttft_ms.p99'), '.0f')} | {fmt(metric(r, 'p99_tpot_ms', 'tpot_ms.p99'))} | "
              f"{fmt(metric(r, 'p99_itl_ms', 'itl_ms.p99'))} | {fmt(r.get('wall_s'), '.0f')} |")
    base = next((r for r in rows if r.get("baseline")), None)
    feas = [r for r in rows if r.get("feasible") and r.get("capacity") is not None]
    best = max(feas, key=lambda r: (r["capacity"], r.get("objective") or 0), default=None)
    ratio = None
    if not s["finished"]:
        print(f"study cut off before its end (device time ran out): {len(rows)} trial(s) recorded; no tuned/default "
              "ratio from this run alone")
    elif base and best and base.get("capacity"):
        ratio = best["capacity"] / base["capacity"]
        b_lo, b_hi = bounds(base)
        w_lo, w_hi = bounds(best)
        print(f"tuned/default SLA capacity = {best['capacity']:g} / {base['capacity']:g} = {ratio:.3f} "
              f"(winner {best['trial_id']}: {config_text(best)}; baseline bracket [{fmt(b_lo, 'g')}, {fmt(b_hi, 'g')}), "
              f"winner bracket [{fmt(w_lo, 'g')}, {fmt(w_hi, 'g')}){'' if b_hi and w_hi else '; NOT bounded above'})")
        if best is base or best["capacity"] <= base["capacity"]:
            print("the defaults were not beaten on SLA capacity")
    t = s["timing"]
    gpu_min = None
    if t.get("promoted_mtime") and t.get("start_epoch") and t.get("gpus"):
        gpu_min = (float(t["promoted_mtime"]) - float(t["start_epoch"])) * int(t["gpus"]) / 60
        print(f"GPU-minutes from `tuner.run` start to promoted.yaml: {gpu_min:.1f} "
              f"({t['gpus']} GPUs x {(float(t['promoted_mtime']) - float(t['start_epoch'])) / 60:.1f} min)")
    starts = [(r["start_s"], r["wall_s"]) for r in rows if r.get("start_s") and r.get("wall_s")]
    if starts:
        st, wall = sum(x for x, _ in starts), sum(w for _, w in starts)
        print(f"server start: {st:.0f} s of {wall:.0f} s of trial time ({100 * st / wall:.0f}%), per trial "
              + ", ".join(f"{x:.0f}/{w:.0f} s" for x, w in starts))
    for f in sorted(s["folder"].glob("requests_*.parquet")):
        args = json.loads((best if f.stem == "requests_winner" and best else base or {}).get("args_json") or "{}") \
            if f.stem in ("requests_winner", "requests_baseline") else {"quantization": "fp8", "kv_cache_dtype": "fp8"}
        bw = decode_bandwidth(f, "fp8" in str(args.get("quantization")), "fp8" in str(args.get("kv_cache_dtype")))
        print(f"decode bandwidth ({f.name}, the point it recorded): {bw['tbps']:.2f} TB/s = {100 * bw['share']:.0f}% of "
              f"{SPEC_TBPS} TB/s (mean decode batch {bw['batch']:.0f}, context {bw['context']:.0f} tokens, "
              f"{bw['decode_tok_s']:,.0f} decode tok/s, {bw['step_gb']:.1f} GB a step)")
    d = s["deploy"]
    if d:
        print("deploy on the GPU: " + ", ".join(f"{k}={v}" for k, v in d.items() if not k.endswith("_epoch")))
    rb = s["folder"] / "rollback.log.gz"
    if rb.is_file():  # a later deploy + --rollback on the same store (scripts/h200 commands in docs/benchmarks.md)
        lines = gzip.decompress(rb.read_bytes()).decode(errors="replace").splitlines()
        for line in lines:
            if line.startswith(("ok: ", "failed: ", "deployed: ", "canary passed", "canary FAILED", "== ")):
                print(f"rollback.log: {line[:300]}")
    ran = sorted({r["engine"] for r in rows if r.get("outcome") == "ok"})
    return {"test": s["study"]["workload"].get("profile"), "ratio": ratio, "engines": ran, "gpu_min": gpu_min,
            "served": bool(s["deploy"].get("served_on_gpu")), "promoted": s["promoted"], "study": s["study"],
            "name": s["study"].get("name"), "base": base, "best": best}


_GRID_KEYS = ("name", "tracking", "promotion")  # what may differ between runs of one test besides the load grid


def same_test(a: dict, b: dict) -> bool:
    """Two study files that differ only in name, tracking, promotion and the load grid (capacity.low/high):
    the same engine, model, space, workload, SLA, load-point length and budget."""
    def core(st: dict) -> str:
        c = {k: v for k, v in st.items() if k not in _GRID_KEYS}
        c["capacity"] = {k: v for k, v in (st.get("capacity") or {}).items() if k not in ("low", "high")}
        return json.dumps(c, sort_keys=True, default=str)
    return core(a) == core(b)


def pooled(out: list[dict], test: str) -> float | None:
    """The tuned/default ratio of one test from two runs of the same study (only the load grid differs), when
    no single run bounds both: the defaults' capacity from one, the best tuned capacity from another. Printed
    with both brackets and every other run's baseline points, so a disagreement between the runs shows."""
    runs = [o for o in out if o["test"] == test]
    bases = [o for o in runs if o["base"] is not None and o["base"].get("capacity")]
    tuned = [o for o in runs if o["best"] is not None and not o["best"].get("baseline")]
    pairs = [(b, t) for b in bases for t in tuned if b is not t and same_test(b["study"], t["study"])]
    if not pairs:
        return None
    b, t = max(pairs, key=lambda p: p[1]["best"]["capacity"] / p[0]["base"]["capacity"])
    bc, tc = b["base"]["capacity"], t["best"]["capacity"]
    (b_lo, b_hi), (t_lo, t_hi) = bounds(b["base"]), bounds(t["best"])
    others = "; ".join(
        f"{o['name']} baseline points "
        + " ".join(f"{p['load']:g}{'' if p.get('feasible') else 'x'}" for p in json.loads(o["base"].get("points_json") or "[]"))
        for o in runs if o is not b and o["base"] is not None)
    lo = f"{t_lo / b_hi:.2f}" if t_lo and b_hi else "na"
    hi = f"{t_hi / b_lo:.2f}" if t_hi and b_lo else "na"
    print(f"\n{test}: pooled over two runs of the same study (only the load grid differs): tuned {tc:g} req/s "
          f"[{fmt(t_lo, 'g')}, {fmt(t_hi, 'g')}) ({t['name']}: {config_text(t['best'])}) / defaults {bc:g} "
          f"[{fmt(b_lo, 'g')}, {fmt(b_hi, 'g')}) ({b['name']}) = {tc / bc:.3f}, bracket {lo}-{hi}"
          + (f"; {others}" if others else ""))
    return tc / bc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results")
    a = p.parse_args()
    folders = sorted([*a.results.glob("h200-*"), *a.results.glob("h200/h200-*")], key=lambda f: f.name)
    studies = [s for f in folders if (s := load_study(f))]  # thin-path folders have no study.yaml
    if not studies:
        print(f"no tuner.run H200 results under {a.results}/h200-*/ (trials.parquet + study.yaml)")
    out = [summarize(s) for s in studies]
    ratios = {}
    for test in TESTS:
        vals = [o["ratio"] for o in out if o["test"] == test and o["ratio"] is not None]
        if not vals and (p := pooled(out, test)) is not None:
            vals = [p]
        ratios[test] = fmt(max(vals), ".3f") if vals else "na"
    engines = sorted({e for o in out for e in o["engines"]})
    gpu = [o["gpu_min"] for o in out if o["gpu_min"] is not None]
    print("\n" + " ".join(f"tuned_vs_default_{t}={ratios[t]}" for t in TESTS)
          + f" engines={','.join(engines) or 'na'} served_on_gpu={'yes' if any(o['served'] for o in out) else 'no'}"
          + f" gpu_minutes_to_promoted={fmt(min(gpu), '.1f') if gpu else 'na'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
