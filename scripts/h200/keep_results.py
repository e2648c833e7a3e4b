"""LOCAL: keep what a device run of `python -m tuner.run` brought back, small, under benchmarks/results/.

From the study folder (the tarball of scripts/h200/tuner_collect.sh, or that folder already unpacked as
DEVICE_FILES_DIR/NAME/) and the driver files: trials.parquet, pareto.json, promoted.yaml, promotion.json,
sim_gate.jsonl, report.html (gzipped; with --no-report-html only plots/*.html, gzipped: the same figures
loading plotly.js from its CDN, since report.html is mostly 4.8 MB of plotly.js inline), the MLflow SQLite
store (gzipped), the study and its search-space file(s), timing.json, deploy.json/deploy.log/rollback.log,
each deploy step's promotion.json and the Serve replicas' engine logs (gzipped) when the promoted app was
served, the failover demo's files (scripts/h200/failover_demo.sh: failover.json, failover-gpu.csv,
failover.log gzipped, each side's promoted.yaml and promotion.json), the driver log, and per trial its
engine log (gzipped) and, for the baseline and the winner, the per-request Parquet; in a study of several
engines, for each engine's baseline and best (requests_<engine>_baseline/_best.parquet).

    python scripts/h200/keep_results.py DEVICE_FILES_DIR NAME STUDY_YAML --dest benchmarks/results/h200-NAME
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import yaml


def gz(src: Path, dst: Path) -> None:
    with src.open("rb") as f, dst.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as g:
        shutil.copyfileobj(f, g)


def best_of(rows: list[dict]) -> dict | None:
    feas = [r for r in rows if r.get("feasible")]
    return max(feas, key=lambda r: (r.get("capacity") or 0, r.get("objective") or 0), default=None)


def record_picks(rows: list[dict]) -> list[tuple[dict, str]]:
    """(trial row, file tag) whose per-request Parquet is kept: the baseline and the winner, or per engine
    its baseline and best when the study ran several engines."""
    engines = sorted({r["engine"] for r in rows})
    if len(engines) <= 1:
        picks = [(next((r for r in rows if r.get("baseline")), None), "baseline"), (best_of(rows), "winner")]
    else:
        picks = []
        for e in engines:
            mine = [r for r in rows if r["engine"] == e]
            picks += [(next((r for r in mine if r.get("baseline")), None), f"{e}_baseline"), (best_of(mine), f"{e}_best")]
    kept: list[tuple[dict, str]] = []
    for r, tag in picks:  # a best that is the baseline is kept once, as the baseline
        if r is not None and all(r is not k for k, _ in kept):
            kept.append((r, tag))
    return kept


def keep_study_folder(out: Path, dest: Path, *, report_html: bool) -> None:
    for f in ("trials.parquet", "pareto.json", "promoted.yaml", "promotion.json", "deploy.json", "sim_gate.jsonl",
              "failover.json", "failover-gpu.csv"):
        if (out / f).is_file():
            shutil.copy2(out / f, dest / f)
    for f in ("mlflow.db", "deploy.log", "rollback.log", "failover.log", *(("report.html",) if report_html else ())):
        if (out / f).is_file():
            gz(out / f, dest / f"{f}.gz")
    if not report_html:
        for src in sorted((out / "plots").glob("*.html")):
            (dest / "plots").mkdir(exist_ok=True)
            gz(src, dest / "plots" / f"{src.name}.gz")
    for d in sorted(out.glob("promote*")):  # tuner.promote --output folders of the deploy steps
        if (d / "promotion.json").is_file():
            shutil.copy2(d / "promotion.json", dest / f"{d.name}.promotion.json")
    for side in ("failover-primary", "failover-secondary"):  # failover_demo.sh's tuner.promote --output folders
        for f in ("promoted.yaml", "promotion.json"):
            if (out / side / f).is_file():
                (dest / side).mkdir(exist_ok=True)
                shutil.copy2(out / side / f, dest / side / f)
    for src in sorted((out / "replica_logs").glob("*.log")):  # the Serve replicas' engine logs
        (dest / "replica_logs").mkdir(exist_ok=True)
        gz(src, dest / "replica_logs" / f"{src.name}.gz")
    picks = record_picks(pq.read_table(out / "trials.parquet").to_pylist())
    tdir = dest / "trials"
    tdir.mkdir(exist_ok=True)
    for d in sorted((out / "trials").glob("*")):
        if (d / "engine.log").is_file():
            gz(d / "engine.log", tdir / f"{d.name}.engine.log.gz")
        for r, tag in picks:
            if d.name.endswith(r["trial_id"]) and (d / "requests.parquet").is_file():
                shutil.copy2(d / "requests.parquet", dest / f"requests_{tag}.parquet")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", type=Path, help="folder with NAME.tar.gz (or NAME/ unpacked), NAME.log, NAME.timing.json")
    p.add_argument("name")
    p.add_argument("study", type=Path)
    p.add_argument("--dest", type=Path, required=True)
    p.add_argument("--no-report-html", action="store_true", help="keep plots/*.html instead of report.html")
    p.add_argument("--also", type=Path, nargs="*", default=[], help="further files to copy as they are")
    a = p.parse_args()
    dest = a.dest
    dest.mkdir(parents=True, exist_ok=True)
    if (a.files / f"{a.name}.tar.gz").is_file():
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(a.files / f"{a.name}.tar.gz") as t:
                t.extractall(tmp, filter="data")
            keep_study_folder(Path(tmp) / a.name, dest, report_html=not a.no_report_html)
    elif (a.files / a.name / "trials.parquet").is_file():
        keep_study_folder(a.files / a.name, dest, report_html=not a.no_report_html)
    else:
        p.error(f"neither {a.files / a.name}.tar.gz nor {a.files / a.name}/trials.parquet")
    shutil.copy2(a.study, dest / "study.yaml")
    space = yaml.safe_load(a.study.read_text()).get("search_space", {})
    files = [space.get("file")] if "file" in space else [v.get("file") for v in space.values() if isinstance(v, dict)]
    for f in filter(None, files):
        shutil.copy2(a.study.parent / f, dest / Path(f).name)
    for f, to in ((f"{a.name}.timing.json", "timing.json"), (f"{a.name}.log", "driver.log")):
        if (a.files / f).is_file():
            shutil.copy2(a.files / f, dest / to)
    for f in a.also:
        shutil.copy2(f, dest / f.name)
    print(json.dumps({str(f.relative_to(dest)): f.stat().st_size for f in sorted(dest.rglob("*")) if f.is_file()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
