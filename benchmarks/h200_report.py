"""What servetune's own front door (`python -m tuner.run`) measured on H200s, from committed files only.

Reads every benchmarks/results/h200-<study>/ (rounds 1-2) and benchmarks/results/h200/<study>/ (round 3 on)
folder written back from the device (trials.parquet,
study.yaml, timing.json, promoted.yaml, deploy.json when a promoted app was served) and prints, per
study, each trial's SLA capacity and latencies, then one last line:

  tuned_vs_default_static=X tuned_vs_default_dynamic=Y tuned_vs_default_mixed=Z engines=...
  served_on_gpu=yes|no gpu_minutes_to_promoted=M

tuned_vs_default_<test>: best feasible SLA capacity / the baseline's (defaults), for the study of that
stress test (workload.profile in its study.yaml); `na` where no such study is committed or a side has
no capacity. Values this script cannot know are printed as `na`, never filled in.

    python benchmarks/h200_report.py [--results benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml

TESTS = ("static", "dynamic", "mixed")


def load_study(folder: Path) -> dict | None:
    if not (folder / "trials.parquet").is_file() or not (folder / "study.yaml").is_file():
        return None
    study = yaml.safe_load((folder / "study.yaml").read_text())
    rows = pq.read_table(folder / "trials.parquet").to_pylist()
    timing = json.loads((folder / "timing.json").read_text()) if (folder / "timing.json").is_file() else {}
    deploy = json.loads((folder / "deploy.json").read_text()) if (folder / "deploy.json").is_file() else {}
    return {"folder": folder, "study": study, "rows": rows, "timing": timing, "deploy": deploy,
            "promoted": (folder / "promoted.yaml").is_file()}


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
    if base and best and base.get("capacity"):
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
    d = s["deploy"]
    if d:
        print("deploy on the GPU: " + ", ".join(f"{k}={v}" for k, v in d.items() if not k.endswith("_epoch")))
    ran = sorted({r["engine"] for r in rows if r.get("outcome") == "ok"})
    return {"test": s["study"]["workload"].get("profile"), "ratio": ratio, "engines": ran, "gpu_min": gpu_min,
            "served": bool(s["deploy"].get("served_on_gpu")), "promoted": s["promoted"]}


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
        ratios[test] = fmt(max(vals), ".3f") if vals else "na"
    engines = sorted({e for o in out for e in o["engines"]})
    gpu = [o["gpu_min"] for o in out if o["gpu_min"] is not None]
    print("\n" + " ".join(f"tuned_vs_default_{t}={ratios[t]}" for t in TESTS)
          + f" engines={','.join(engines) or 'na'} served_on_gpu={'yes' if any(o['served'] for o in out) else 'no'}"
          + f" gpu_minutes_to_promoted={fmt(min(gpu), '.1f') if gpu else 'na'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
