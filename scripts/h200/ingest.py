"""Back from the H200: turn the device driver's files into the pipeline's outputs, MLflow runs and a report.

The device has no MLflow or plotly, so scripts/h200/device_study.py only writes trials.parquet and a
tarball of the trial folders. Here, with the pipeline's own code, this writes what `python -m
tuner.run.cli` writes after its search: trials.parquet, pareto.json, report.html (kept gzipped), one MLflow parent run
with a child run per trial (engine log and per-request Parquet as artifacts), plus the per-request
Parquet of the baseline and the winner at their capacity point, copied where the repo keeps them.

    python scripts/h200/ingest.py studies/h200-static.yaml DEVICE_OUT_DIR \
        --dest benchmarks/results/h200/h200-static --mlflow-uri sqlite:///runs/h200/mlflow.db
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tuner.run.outputs import write_pareto  # noqa: E402
from tuner.search.space import build_space  # noqa: E402
from tuner.spec.load import load_study  # noqa: E402
from tuner.spec.study import Study  # noqa: E402
from tuner.tracking.mlflow_log import StudyTracker, default_uri  # noqa: E402
from tuner.trial.result import TrialResult  # noqa: E402
from tuner.trial.table import read_trials, write_trials  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", type=Path)
    p.add_argument("device_out", type=Path, help="folder with trials.parquet and trials.tar.gz from the device")
    p.add_argument("--dest", type=Path, required=True, help="results folder (committed)")
    p.add_argument("--mlflow-uri", default=None, help="default: SQLite under runs/h200/<study>")
    return p.parse_args(argv)


def unpack(device_out: Path, work: Path) -> Path:
    """Extract trials.tar.gz safely (no absolute paths or '..') and return the trials folder."""
    with tarfile.open(device_out / "trials.tar.gz") as tar:
        for m in tar.getmembers():
            if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                raise ValueError(f"refusing tar member {m.name!r}")
        tar.extractall(work, filter="data")
    return work / "trials"


def relocate(trials: list[TrialResult], trials_dir: Path) -> None:
    """Device paths (/tmp/...) -> the unpacked copies, so MLflow and the report find the files."""
    for t in trials:
        folder = trials_dir / f"{t.number:03d}-{t.trial_id}"
        for attr, name in (("records_path", "requests.parquet"), ("log_path", "engine.log")):
            if getattr(t, attr) and (folder / name).exists():
                setattr(t, attr, str(folder / name))


def winner(trials: list[TrialResult]) -> TrialResult | None:
    feasible = [t for t in trials if t.feasible]
    return max(feasible, key=lambda t: t.objective or 0.0) if feasible else None


def log_mlflow(study: Study, study_path: Path, trials: list[TrialResult], uri: str, dest: Path,
               files: list[Path]) -> str:
    space = build_space(study, REPO)
    tracker = StudyTracker(uri, study.tracking.experiment or study.name, study.name, dest.parent / "mlartifacts")
    parent = tracker.start(tags={"servetune.host": "nvidia-h200 (device driver, scripts/h200)"})
    tracker.log_study(study_path, space.describe(), {
        "engine": ",".join(study.engine_names), "model": study.model.name,
        "sla": ";".join(map(str, study.sla)), "objective": study.objective.metric, "seed": study.seed,
        "trials": len(trials)})
    names: list[str] = []
    defaults: dict[str, object] = {}
    for sp in space.engines.values():
        names += [n for n in sp.params if n not in names]
        defaults.update(sp.defaults())
    for t in trials:
        t.mlflow_run_id = tracker.log_trial(t, names, defaults)
    base = next((t for t in trials if t.baseline), None)
    best = winner(trials)
    tracker.log_outputs(files, {
        "trials_ok": sum(t.outcome.ran for t in trials), "trials_failed": sum(not t.outcome.ran for t in trials),
        "best_objective": best.objective if best else None, "baseline_objective": base.objective if base else None,
        "tuned_vs_default": (best.objective / base.objective) if best and base and base.objective else None,
        "tuned_vs_default_capacity": (best.capacity / base.capacity) if best and base and base.capacity else None,
    })
    tracker.finish(True)
    return parent


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    study = load_study(args.study)
    dest = args.dest
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trials_dir = unpack(args.device_out, work)
        trials = read_trials(args.device_out / "trials.parquet")
        relocate(trials, trials_dir)
        base = next((t for t in trials if t.baseline), None)
        best = winner(trials)
        for label, t in (("baseline", base), ("winner", best)):
            if label == "winner" and best is base:
                continue  # the defaults won: requests_baseline.parquet is the winner's too
            if t is not None and t.records_path:
                shutil.copyfile(t.records_path, dest / f"requests_{label}.parquet")
        from tuner.run.flow import _report

        write_trials(dest / "trials.parquet", trials)
        write_pareto(dest / "pareto.json", trials, study.sla, study.objective.metric,
                     study.objective.latency_metric, [], best.trial_id if best else None)
        report = _report(study, trials, dest, best.trial_id if best else None)
        with tarfile.open(dest / "trial_files.tar.gz", "w:gz") as tar:  # engine logs, GPU samples, driver log
            for f in sorted(work.rglob("*")):
                if f.is_file() and f.name != "requests.parquet":
                    tar.add(f, arcname=str(f.relative_to(work)))
        uri = args.mlflow_uri or default_uri(REPO / "runs" / "h200" / study.name)
        (REPO / "runs" / "h200" / study.name).mkdir(parents=True, exist_ok=True)
        parent = log_mlflow(study, args.study, trials, uri, REPO / "runs" / "h200" / study.name,
                            [dest / "trials.parquet", dest / "pareto.json", *([report] if report else [])])
        if report:  # committed gzipped: the repo travels to the GPU host, 64 MiB a command with the pack
            with open(report, "rb") as src, gzip.open(dest / "report.html.gz", "wb", compresslevel=9) as gz:
                shutil.copyfileobj(src, gz)
            Path(report).unlink()
        shutil.rmtree(dest / "plots", ignore_errors=True)  # the same figures, inside the report
    print(f"{len(trials)} trials -> {dest}; MLflow {uri} parent run {parent}")
    for t in trials:
        print(f"  {t.number:>2} {'base ' if t.baseline else '     '}{t.outcome.value:13s} cap={t.capacity} "
              f"obj={t.objective} start_s={t.start_s} wall_s={t.wall_s:.0f} args={t.args}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
