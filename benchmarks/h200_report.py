"""What servetune's own front door (`python -m tuner.run`) measured on H200s, from committed files only.

Reads every benchmarks/results/h200-<study>/ (rounds 1-2) and benchmarks/results/h200/<study>/ (round 3 on)
folder written back from the device (trials.parquet,
study.yaml, timing.json, promoted.yaml, deploy.json when a promoted app was served) and prints, per
study, each trial's SLA capacity and latencies, then one last line:

  tuned_vs_default_static=X tuned_vs_default_dynamic=Y tuned_vs_default_mixed=Z engines=...
  served_on_gpu=yes|no gpu_minutes_to_promoted=M

tuned_vs_default_<test>: best feasible SLA capacity / the baseline's (defaults), for the study of that
stress test (workload.profile in its study.yaml); in a study of several engines the baseline is the engines'
best defaults. Where several runs of one test each give a ratio, each is printed with its bracket and the last
line takes the one whose bracket is narrowest (the finer load grid; runs with a bound missing count last);
they are never pooled. Where no single run has both, two runs of the same study that differ only in the load
grid are pooled (said in the output, with both brackets); `na` where no such study is committed or a side
has no capacity. A run cut off before its end gives no ratio of its own. A study of several engines also
gets a per-engine table (each engine's defaults and best at its capacity point, KV cache from the engine
logs), and a failover demo in its folder (failover.json) counts as served on the GPU. Values this script
cannot know are printed as `na`, never filled in.

    python benchmarks/h200_report.py [--results benchmarks/results]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
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
    timing, deploy, failover = (_json_file(folder / f"{n}.json") for n in ("timing", "deploy", "failover"))
    return {"folder": folder, "study": study, "rows": rows, "timing": timing, "deploy": deploy, "failover": failover,
            "promoted": (folder / "promoted.yaml").is_file(), "finished": finished(folder)}


def _json_file(path: Path) -> dict:
    """A JSON file a run may not have written (timing, deploy, failover): {} when absent."""
    return json.loads(path.read_text()) if path.is_file() else {}


def points(row: dict) -> list[dict]:
    """A trials.parquet row's load points (its points_json; none for a trial that never measured one)."""
    return json.loads(row.get("points_json") or "[]")


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
    pts = points(row)
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


def baseline_of(rows: list[dict]) -> dict | None:
    """The defaults' trial; with several engines, the engine defaults with the highest SLA capacity (then
    output tokens/s), so a tuned/default ratio is against the best the engines give untuned."""
    bases = [r for r in rows if r.get("baseline")]
    return max(bases, key=lambda r: (r.get("capacity") or 0, r.get("objective") or 0), default=None)


def best_of(rows: list[dict]) -> dict | None:
    feas = [r for r in rows if r.get("feasible") and r.get("capacity") is not None]
    return max(feas, key=lambda r: (r["capacity"], r.get("objective") or 0), default=None)


def records_row(stem: str, rows: list[dict]) -> dict | None:
    """The trial a kept per-request file belongs to (scripts/h200/keep_results.py names): requests_baseline,
    requests_winner, or requests_<engine>_baseline / _best in a study of several engines."""
    if stem == "requests_baseline":
        return next((r for r in rows if r.get("baseline")), None)
    if stem == "requests_winner":
        return best_of(rows)
    for e in {r["engine"] for r in rows}:
        mine = [r for r in rows if r["engine"] == e]
        if stem == f"requests_{e}_baseline":
            return next((r for r in mine if r.get("baseline")), None)
        if stem == f"requests_{e}_best":
            return best_of(mine)
    return None


def ratio_bracket(top: dict | None, bottom: dict | None) -> tuple[float | None, float | None]:
    """Where capacity(top) / capacity(bottom) can lie given both load-grid brackets: above top's met load
    over bottom's missed load, below top's missed load over bottom's met load; None where a bound is missing."""
    if top is None or bottom is None:
        return None, None
    (t_lo, t_hi), (b_lo, b_hi) = bounds(top), bounds(bottom)
    return (t_lo / b_hi if t_lo and b_hi else None), (t_hi / b_lo if t_hi and b_lo else None)


def point_at(row: dict, load: float | None) -> dict:
    return next((p for p in points(row) if p["load"] == load), {})


_KV_PATTERNS = {"vllm": (r"GPU KV cache size: ([\d,]+) tokens", r"GPU KV cache usage: ([\d.]+)%", 1.0),
                "sglang": (r"max_total_num_tokens=(\d+)", r"token usage: ([\d.]+)", 100.0)}


def kv_cache(folder: Path, row: dict) -> tuple[int | None, float | None]:
    """(KV cache size in tokens, highest KV use in % the engine logged over all of the trial's load points)
    from the kept engine log: vLLM's 'GPU KV cache usage' (every 10 s), SGLang's 'token usage' (per logged
    batch). The log lines carry no load point, so the peak is the trial's, not the capacity point's."""
    pat = _KV_PATTERNS.get(row["engine"])
    logs = sorted((folder / "trials").glob(f"*{row['trial_id']}.engine.log.gz"))
    if pat is None or not logs:
        return None, None
    text = gzip.decompress(logs[0].read_bytes()).decode(errors="replace")
    size = re.search(pat[0], text)
    use = [float(u) * pat[2] for u in re.findall(pat[1], text)]
    return (int(size.group(1).replace(",", "")) if size else None), (max(use) if use else None)


def _cap(row: dict) -> str:
    lo, hi = bounds(row)
    return f"{fmt(row.get('capacity'), 'g')} [{fmt(lo, 'g')}, {fmt(hi, 'g')})"


def _between(a: dict, b: dict, what: str) -> str:
    lo, hi = ratio_bracket(a, b)
    return (f"{what} = {a['capacity']:g} / {b['capacity']:g} = {a['capacity'] / b['capacity']:.3f} "
            f"(from the brackets {fmt(lo, '.2f')}-{fmt(hi, '.2f')})")


def engines_table(s: dict) -> None:
    """A study of several engines: each engine's defaults and best SLA-feasible config at its capacity point
    (the seeds' per-engine comparison), the same at the highest load every trial measured, the joint winner.
    Jitter: std / mean of the requests' TPOT (servetune's jitter_tpot) and P99 ITL / P50 ITL (decode stalls)."""
    rows, folder = s["rows"], s["folder"]
    engines = sorted({r["engine"] for r in rows})
    print(f"\n### engines compared ({', '.join(engines)}): each engine's defaults and best SLA-feasible config, "
          "at its capacity point (jitter TPOT = std/mean of the requests' TPOT; ITL P99/P50; KV peak = the highest "
          "use the engine logged over all of the trial's points)")
    print("| engine | role | trial | config | capacity [bracket] | out tok/s | P50 TTFT ms | P99 TTFT ms | P50 TPOT ms | "
          "P99 TPOT ms | P50 ITL ms | P99 ITL ms | jitter TPOT | ITL P99/P50 | KV cache tokens | KV peak % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    pairs: dict[str, tuple[dict | None, dict | None]] = {}
    for e in engines:
        mine = [r for r in rows if r["engine"] == e]
        base, best = next((r for r in mine if r.get("baseline")), None), best_of(mine)
        pairs[e] = (base, best)
        for role, r in (("defaults", base), ("best", best)):
            if r is None or (role == "best" and r is base):
                continue
            p = point_at(r, r.get("capacity"))
            size, peak = kv_cache(folder, r)
            itl = p.get("p99_itl_ms") / p["p50_itl_ms"] if p.get("p99_itl_ms") and p.get("p50_itl_ms") else None
            print(f"| {e} | {role} | {r['trial_id']} | {config_text(r)} | {_cap(r)} | {fmt(p.get('output_throughput'), ',.0f')} | "
                  f"{fmt(p.get('p50_ttft_ms'), '.0f')} | {fmt(p.get('p99_ttft_ms'), '.0f')} | {fmt(p.get('p50_tpot_ms'))} | "
                  f"{fmt(p.get('p99_tpot_ms'))} | {fmt(p.get('p50_itl_ms'))} | {fmt(p.get('p99_itl_ms'))} | "
                  f"{fmt(p.get('jitter_tpot'), '.3f')} | {fmt(itl, '.1f')} | {fmt(size, ',d')} | {fmt(peak, '.1f')} |")
    common = set.intersection(*[{p["load"] for p in points(r)} for r in rows])
    for load in sorted(common):
        print(f"at {load:g} req/s (a load every trial measured): " + "; ".join(
            f"{r['engine']} {config_text(r)} P99 TTFT {fmt(point_at(r, load).get('p99_ttft_ms'), '.0f')} ms, "
            f"P99 TPOT {fmt(point_at(r, load).get('p99_tpot_ms'))} ms, P99 ITL {fmt(point_at(r, load).get('p99_itl_ms'))} ms, "
            f"{fmt(point_at(r, load).get('output_throughput'), ',.0f')} tok/s" for r in sorted(rows, key=lambda r: r["number"])))
    for e, (base, best) in pairs.items():
        if base and best and base.get("capacity"):
            verdict = "" if best["capacity"] > base["capacity"] else (
                f"; not above the defaults on SLA capacity (output tok/s at {best['capacity']:g} req/s: "
                f"{fmt(best.get('objective'), ',.0f')} vs {fmt(base.get('objective'), ',.0f')})" if best is not base else
                "; the defaults were its best")
            print(_between(best, base, f"{e}: best / defaults SLA capacity") + verdict)
    for r in rows:
        for n in json.loads(r.get("notes_json") or "[]"):
            if n.startswith("rung-stopped"):
                print(f"note: {r['engine']} {r['trial_id']} {n}; its bracket is that of the points it ran")
    ranked = sorted(((best, e) for e, (_, best) in pairs.items() if best is not None),
                    key=lambda x: (x[0]["capacity"], x[0].get("objective") or 0), reverse=True)
    if len(ranked) > 1:
        (w, we), (r2, e2) = ranked[0], ranked[1]
        print(_between(w, r2, f"best {we} / best {e2} SLA capacity"))
        bases = sorted(((b, e) for e, (b, _) in pairs.items() if b is not None and b.get("capacity")),
                       key=lambda x: (x[0]["capacity"], x[0].get("objective") or 0), reverse=True)
        if len(bases) > 1:
            (b1, e1), (b2, eb2) = bases[0], bases[1]
            print(_between(b1, b2, f"defaults {e1} / defaults {eb2} SLA capacity"))
        print(f"joint winner: {we} {w['trial_id']} ({config_text(w)}), SLA capacity {_cap(w)} req/s")


def failover_section(folder: Path, f: dict) -> list[str]:
    """The failover demo (scripts/h200/failover_demo.sh) on the GPU: who answered before and after the
    primary's engine was killed. Returns the engines that streamed on the GPU ([] when it did not pass)."""
    sides = {}
    for side in ("primary", "secondary"):
        y = folder / f"failover-{side}" / "promoted.yaml"
        app = yaml.safe_load(y.read_text())["applications"][0]["args"] if y.is_file() else {}
        sides[side] = (app.get("engine", "na"), (app.get("lineage") or {}).get("trial_id", "na"),
                       (app.get("lineage") or {}).get("model_version", "na"))
    res = f.get("result") or {}
    share = res.get("gpu_sharing") or {}
    print("\nfailover on the GPU (failover.json): exit " + str(f.get("exit_code")) + "; " + ", ".join(
        f"{side} {e} (trial {t}, model version {v}; Ray num_gpus {fmt((share.get(side) or {}).get('ray_num_gpus'), 'g')}, "
        f"{(share.get(side) or {}).get('memory_knob', 'memory')} {fmt((share.get(side) or {}).get('deployed'), 'g')})"
        for side, (e, t, v) in sides.items()) + f"; deployed in {fmt(res.get('deploy_s'))} s")
    print(f"  answered before the kill: {', '.join(f.get('before') or []) or 'none'}; killed the primary's engine "
          f"(pids {', '.join(map(str, res.get('killed_pids') or []))}); answered after: "
          f"{', '.join(f.get('after') or []) or 'none'}; router state {json.dumps(res.get('router_state'))}")
    csv = folder / "failover-gpu.csv"
    if csv.is_file():
        peak: dict[str, int] = {}
        for line in csv.read_text().splitlines()[1:]:
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 4 and parts[3].endswith("MiB"):
                peak[parts[2]] = max(peak.get(parts[2], 0), int(parts[3].split()[0]))
        print("  peak GPU memory per process (failover-gpu.csv, every 10 s): "
              + ", ".join(f"{k} {v:,} MiB" for k, v in peak.items()))
    if f.get("exit_code") != 0 or not res.get("ok"):
        return []
    served = ([sides["primary"][0]] if "primary" in (f.get("before") or []) else []) + \
        ([sides["secondary"][0]] if "secondary" in (f.get("after") or []) else [])
    print(f"  served on the GPU: {', '.join(served)} (the secondary streamed after the primary's engine was killed)")
    return served


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
        pts = points(r)
        seq = " ".join(f"{p['load']:g}{'' if p.get('feasible') else 'x'}" for p in pts)
        lo, hi = bounds(r)
        print(f"| {r['trial_id']} | {config_text(r)} | {r['outcome']} | {seq} | {fmt(r.get('capacity'), 'g')} | "
              f"[{fmt(lo, 'g')}, {fmt(hi, 'g')}) | {fmt(r.get('objective'), ',.0f')} | "
              f"{fmt(metric(r, 'p99_ttft_ms', 'ttft_ms.p99'), '.0f')} | {fmt(metric(r, 'p99_tpot_ms', 'tpot_ms.p99'))} | "
              f"{fmt(metric(r, 'p99_itl_ms', 'itl_ms.p99'))} | {fmt(r.get('wall_s'), '.0f')} |")
    base, best = baseline_of(rows), best_of(rows)
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
        args = json.loads((records_row(f.stem, rows) or {}).get("args_json") or "{}") \
            if records_row(f.stem, rows) else {"quantization": "fp8", "kv_cache_dtype": "fp8"}
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
    if len({r["engine"] for r in rows}) > 1:
        engines_table(s)
    served_failover = failover_section(s["folder"], s["failover"]) if s["failover"] else []
    return {"test": s["study"]["workload"].get("profile"), "ratio": ratio, "engines": ran, "gpu_min": gpu_min,
            "served": bool(s["deploy"].get("served_on_gpu")) or bool(served_failover), "promoted": s["promoted"],
            "study": s["study"], "name": s["study"].get("name"), "base": base, "best": best, "rows": rows,
            "bracket": ratio_bracket(best, base) if ratio is not None else (None, None)}


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
        + " ".join(f"{p['load']:g}{'' if p.get('feasible') else 'x'}" for p in points(o["base"]))
        for o in runs if o is not b and o["base"] is not None)
    lo = f"{t_lo / b_hi:.2f}" if t_lo and b_hi else "na"
    hi = f"{t_hi / b_lo:.2f}" if t_hi and b_lo else "na"
    print(f"\n{test}: pooled over two runs of the same study (only the load grid differs): tuned {tc:g} req/s "
          f"[{fmt(t_lo, 'g')}, {fmt(t_hi, 'g')}) ({t['name']}: {config_text(t['best'])}) / defaults {bc:g} "
          f"[{fmt(b_lo, 'g')}, {fmt(b_hi, 'g')}) ({b['name']}) = {tc / bc:.3f}, bracket {lo}-{hi}"
          + (f"; {others}" if others else ""))
    return tc / bc


def _flat(d: dict, pre: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{pre}{k}."))
        else:
            out[f"{pre}{k}"] = json.dumps(v, default=str)
    return out


def study_diff(a: dict, b: dict) -> str:
    """What two study files set differently (name, tracking and promotion aside), as `key a vs b`."""
    fa, fb = _flat({k: v for k, v in a.items() if k not in _GRID_KEYS}), _flat({k: v for k, v in b.items() if k not in _GRID_KEYS})
    keys = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k) and not k.startswith("engines."))
    return ", ".join(f"{k} {fa.get(k, '-')} vs {fb.get(k, '-')}" for k in keys)


def _overlap(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool:
    inf = float("inf")
    return (a[0] or 0) < (b[1] or inf) and (b[0] or 0) < (a[1] or inf)


def chosen(out: list[dict], test: str) -> float | None:
    """The tuned/default ratio the last line gives for a test that single runs answer. Several runs: each is
    printed with its bracket, and the one whose bracket is narrowest (the finer load grid) is taken; a run
    with a bound missing counts last, ties go to the higher ratio. Runs are not pooled here: a tuned capacity
    of one run over the defaults of another is only taken when no run has both (pooled, same_test)."""
    runs = [o for o in out if o["test"] == test and o["ratio"] is not None]
    if not runs:
        return None

    def width(o: dict) -> float:
        lo, hi = o["bracket"]
        return hi / lo if lo and hi else float("inf")

    pick = min(runs, key=lambda o: (width(o), -o["ratio"]))
    if len(runs) > 1:
        print(f"\n{test}: {len(runs)} runs each give a tuned/default SLA capacity ratio (each from its own defaults; "
              "not pooled)")
        for o in runs:
            cap = o["study"].get("capacity") or {}
            lo, hi = o["bracket"]
            print(f"  {o['name']}: {o['best']['capacity']:g} / {o['base']['capacity']:g} = {o['ratio']:.3f}, bracket "
                  f"{fmt(lo, '.2f')}-{fmt(hi, '.2f')} (defaults {o['base']['engine']} {_cap(o['base'])}, best "
                  f"{o['best']['engine']} {config_text(o['best'])} {_cap(o['best'])}); grid from {cap.get('low')}, cap "
                  f"{cap.get('high')}, {cap.get('max_points')} points of {cap.get('duration_s')} s")
        for i, a in enumerate(runs):
            for b in runs[i + 1:]:
                for e in sorted({r["engine"] for r in a["rows"]} & {r["engine"] for r in b["rows"]}):
                    ra = next((r for r in a["rows"] if r["engine"] == e and r.get("baseline")), None)
                    rb = next((r for r in b["rows"] if r["engine"] == e and r.get("baseline")), None)
                    if ra and rb and not _overlap(bounds(ra), bounds(rb)):
                        print(f"  {e} defaults: {_cap(ra)} in {a['name']}, {_cap(rb)} in {b['name']}: the brackets do not "
                              f"overlap, so the runs measured the same defaults differently; the studies differ in: "
                              f"{study_diff(a['study'], b['study'])}")
                        for load in sorted({q["load"] for q in points(ra)}
                                           & {q["load"] for q in points(rb)}):
                            pa, pb = point_at(ra, load), point_at(rb, load)
                            if pa.get("feasible") != pb.get("feasible"):
                                print(f"    at {load:g} req/s: " + ", ".join(
                                    f"{'met' if q.get('feasible') else 'missed'} in {o['name']} (P99 TTFT "
                                    f"{fmt(q.get('p99_ttft_ms'), '.0f')} ms, P99 TPOT {fmt(q.get('p99_tpot_ms'))} ms)"
                                    for q, o in ((pa, a), (pb, b))))
        print(f"  the last line takes {pick['name']} ({pick['ratio']:.3f}): the narrowest bracket")
    return float(pick["ratio"])


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
        r = chosen(out, test)
        ratios[test] = fmt(r if r is not None else pooled(out, test), ".3f")
    engines = sorted({e for o in out for e in o["engines"]})
    gpu = [o["gpu_min"] for o in out if o["gpu_min"] is not None]
    print("\n" + " ".join(f"tuned_vs_default_{t}={ratios[t]}" for t in TESTS)
          + f" engines={','.join(engines) or 'na'} served_on_gpu={'yes' if any(o['served'] for o in out) else 'no'}"
          + f" gpu_minutes_to_promoted={fmt(min(gpu), '.1f') if gpu else 'na'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
