"""Copy a rate sweep of `vllm bench serve --save-detailed` results into benchmarks/reference/<set> as a detailed set.

Why: the per-request arrays (ttfts, itls, lengths, start_times) are what the shape hold-out needs (replays, P99
confidence intervals), but the raw files carry every generated text (MBs). Each bench_<prefix>_r<rate>.json is
stored without the texts, its per-request times rounded to 1 us, gzip-compressed; the small run files
(rates_*.json, start_*.txt, logs_*.tar.gz) are copied, plain logs gzip-compressed; points.json lists the points for tuner.sim.reference.bench_set_points. Refuses a set over 5 MB.

    .venv/bin/python benchmarks/import_bench_set.py SRC_DIR SET_NAME --prefix q14b_default --shape qwen3-14b \
        [--max-model-len 40960] [--args '{}']
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.sim.detailed import has_detail, load_json, slim
from tuner.sim.reference import REF_ROOT

LIMIT = 5 * 1024 * 1024


def import_set(src: Path, dst: Path, prefix: str, shape: str, max_model_len: int, args: dict[str, object]) -> list[dict]:
    dst.mkdir(parents=True, exist_ok=True)
    points = []
    pat = re.compile(rf"bench_{re.escape(prefix)}_r([0-9.]+)\.json$")
    files = sorted((f for f in src.iterdir() if pat.match(f.name)), key=lambda f: float(pat.match(f.name)[1]))  # type: ignore[index]
    if not files:
        sys.exit(f"no bench_{prefix}_r<rate>.json in {src}")
    for f in files:
        rate = pat.match(f.name)[1]  # type: ignore[index]
        data = load_json(f)
        if not has_detail(data):
            print(f"warning: {f.name} has no per-request arrays (run without --save-detailed)")
        out = dst / (f.name + ".gz")
        out.write_bytes(gzip.compress(json.dumps(slim(data)).encode(), mtime=0))
        n = int(data.get("num_prompts") or data["completed"])
        ins, outs = data.get("input_lens") or [2048], data.get("output_lens") or [512]
        points.append({"name": f"default_r{rate}" if not args else f"{prefix}_r{rate}", "file": out.name,
                       "args": args, "rate": float(rate), "prompts": n,
                       "input_len": int(round(sum(ins) / len(ins))), "output_len": int(round(sum(outs) / len(outs))),
                       "shape": shape, "max_model_len": max_model_len,
                       "start_times": bool(data.get("start_times"))})
    for f in src.iterdir():
        if f.name.startswith(("rates_", "start_")) and f.suffix in (".json", ".txt"):
            shutil.copyfile(f, dst / f.name)
        elif f.suffix == ".log":
            (dst / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes(), mtime=0))
        elif f.name.startswith("logs_") and f.name.endswith(".tar.gz"):
            shutil.copyfile(f, dst / f.name)
    (dst / "points.json").write_text(json.dumps(points, indent=1) + "\n")
    size = sum(f.stat().st_size for f in dst.iterdir())
    print(f"{dst}: {len(points)} points, {size / 1e6:.2f} MB")
    if size > LIMIT:
        sys.exit(f"{dst} is {size / 1e6:.1f} MB, over the 5 MB limit")
    return points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("set_name")
    ap.add_argument("--prefix", required=True, help="the bench files' name: bench_<prefix>_r<rate>.json")
    ap.add_argument("--shape", required=True, help="tuner.sim.catalog shape served")
    ap.add_argument("--max-model-len", type=int, default=40960)
    ap.add_argument("--args", default="{}", help="engine args (JSON) the server ran with, beyond the defaults")
    a = ap.parse_args()
    import_set(a.src, REF_ROOT / a.set_name, a.prefix, a.shape, a.max_model_len, json.loads(a.args))


if __name__ == "__main__":
    main()
