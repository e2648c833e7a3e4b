"""LOCAL: keep what a device run of `python -m tuner.run` brought back, small, under benchmarks/results/.

From the study folder's tarball (scripts/h200/tuner_collect.sh) and the driver files: trials.parquet,
pareto.json, promoted.yaml, promotion.json, report.html (gzipped), the MLflow SQLite store (gzipped),
the study and its search-space file, timing.json, deploy.json/deploy.log/rollback.log, each deploy step's
promotion.json and the Serve replicas' engine logs (gzipped) when the promoted app was served,
the driver log, and per trial its engine log (gzipped) and, for the baseline and the winner, the
per-request Parquet.

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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", type=Path, help="folder with NAME.tar.gz, NAME.log, NAME.timing.json")
    p.add_argument("name")
    p.add_argument("study", type=Path)
    p.add_argument("--dest", type=Path, required=True)
    a = p.parse_args()
    dest = a.dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(a.files / f"{a.name}.tar.gz") as t:
            t.extractall(tmp, filter="data")
        out = Path(tmp) / a.name
        for f in ("trials.parquet", "pareto.json", "promoted.yaml", "promotion.json", "deploy.json"):
            if (out / f).is_file():
                shutil.copy2(out / f, dest / f)
        for f in ("report.html", "mlflow.db", "deploy.log", "rollback.log"):
            if (out / f).is_file():
                gz(out / f, dest / f"{f}.gz")
        for d in sorted(out.glob("promote*")):  # tuner.promote --output folders of the deploy steps
            if (d / "promotion.json").is_file():
                shutil.copy2(d / "promotion.json", dest / f"{d.name}.promotion.json")
        for f in sorted((out / "replica_logs").glob("*.log")):  # the Serve replicas' engine logs
            (dest / "replica_logs").mkdir(exist_ok=True)
            gz(f, dest / "replica_logs" / f"{f.name}.gz")
        rows = pq.read_table(out / "trials.parquet").to_pylist()
        base = next((r for r in rows if r.get("baseline")), None)
        feas = [r for r in rows if r.get("feasible")]
        best = max(feas, key=lambda r: (r.get("capacity") or 0, r.get("objective") or 0), default=None)
        tdir = dest / "trials"
        tdir.mkdir(exist_ok=True)
        for d in sorted((out / "trials").glob("*")):
            if (d / "engine.log").is_file():
                gz(d / "engine.log", tdir / f"{d.name}.engine.log.gz")
            for r, tag in ((base, "baseline"), (best, "winner")):
                if r is not None and d.name.endswith(r["trial_id"]) and (d / "requests.parquet").is_file():
                    shutil.copy2(d / "requests.parquet", dest / f"requests_{tag}.parquet")
    shutil.copy2(a.study, dest / "study.yaml")
    space = yaml.safe_load(a.study.read_text()).get("search_space", {}).get("file")
    if space:
        shutil.copy2(a.study.parent / space, dest / Path(space).name)
    for f, to in ((f"{a.name}.timing.json", "timing.json"), (f"{a.name}.log", "driver.log")):
        if (a.files / f).is_file():
            shutil.copy2(a.files / f, dest / to)
    print(json.dumps({f.name: f.stat().st_size for f in sorted(dest.rglob("*")) if f.is_file()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
