"""Run a servetune study on a GPU host that has no Ray, MLflow or package registry (the H200 device).

The thin path: servetune's own trial (tuner.trial.runner.run_trial: engine server, capacity search with the
real load generator, outcome mapping) driven by the pipeline's searcher (tuner.search.searcher.SearchCore:
baseline first, constraints, dedup, Optuna) without Ray Tune: one trial per GPU at a time, each in its
own process with its server pinned to its GPU (CUDA_VISIBLE_DEVICES, as Ray would assign it). What MLflow and the report
add is done later, on a machine that has them, from the files this writes (scripts/h200/ingest.py).

Why a separate driver: the host runs one command of at most 10 minutes at a time, keeps /tmp only
while it stays up, and returns at most 8 files. So the study state (Optuna journal, finished trials)
lives in --state (under /tmp) and survives between commands, every trial must fit before --deadline,
and after each trial the whole result so far is packed into --out.

    python3 scripts/h200/device_study.py studies/h200-static.yaml --out $OUT --state /tmp/st \
        --deadline $(( $(date +%s) + 540 )) --trials 3
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import pickle
import sys
import tarfile
import time
import types
import urllib.request
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_sampler import GpuSampler, gpu_count, gpu_state  # noqa: E402

from tuner.engines import gpu as engine_gpu  # noqa: E402
from tuner.search.ask_tell import TrialReport  # noqa: E402
from tuner.search.space import Space, build_space  # noqa: E402
from tuner.spec.load import load_study  # noqa: E402
from tuner.spec.study import Study  # noqa: E402
from tuner.trial.outcome import TrialOutcome  # noqa: E402
from tuner.trial.result import TrialResult  # noqa: E402
from tuner.trial.runner import TrialPlan, run_trial  # noqa: E402
from tuner.trial.table import write_trials  # noqa: E402

log = logging.getLogger("h200")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", type=Path)
    p.add_argument("--out", type=Path, required=True, help="folder whose files come back (8 files at most)")
    p.add_argument("--state", type=Path, default=Path("/tmp/servetune_h200"), help="study state kept between commands")
    p.add_argument("--deadline", type=float, required=True, help="epoch seconds by which every trial must be done")
    p.add_argument("--trials", type=int, default=1, help="trials to run in this command at most")
    p.add_argument("--trial-estimate-s", type=float, default=300.0,
                   help="wall time a trial is assumed to take until one has been measured")
    p.add_argument("--gpus", type=int, default=0, help="trials at once, one GPU each (default: every visible GPU)")
    p.add_argument("--enqueue", default="", help="JSON list of configs (param -> value) to try before sampling")
    p.add_argument("--executor", choices=("process", "ray"), default="process",
                   help="process: a spawned process per trial, GPUs handed out here; ray: a Ray task per trial "
                        "holding num_gpus=1 on a local Ray instance, GPUs assigned by Ray (as the pipeline's "
                        "Tune trials are)")
    return p.parse_args(argv)


def _import_search_core() -> Any:
    """tuner.search.searcher without Ray: its Ray Tune face subclasses ray.tune.search.Searcher, which
    the device lacks, so a stand-in base class is registered when Ray is missing. SearchCore itself
    (ask/tell over Optuna) uses nothing from Ray."""
    try:
        import ray.tune.search  # noqa: F401
    except ImportError:
        for name in ("ray", "ray.tune", "ray.tune.search"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["ray.tune.search"].Searcher = type("Searcher", (), {"FINISHED": "FINISHED"})
    from tuner.search.searcher import SearchCore

    return SearchCore


def reset_prefix_cache_between_points() -> None:
    """POST /reset_prefix_cache before every load run of a trial.

    Every load point of a capacity search sends the same requests (same seed, same ids, so the same
    prompts), and vLLM's prefix cache (~800k tokens on the H200) still holds the previous point's
    prompts: later points would skip most of their prefill and read too good. vLLM answers this
    endpoint when started with VLLM_SERVER_DEV_MODE=1 (set in the study's engine env). A failed reset
    is logged, not fatal.
    """
    import tuner.load.target as target_mod

    base = target_mod.HttpTarget
    if getattr(base, "resets_prefix_cache", False):
        return

    class FreshCacheTarget(base):  # type: ignore[misc, valid-type]
        resets_prefix_cache = True

        def run(self, requests: Any, **kw: Any) -> Any:
            req = urllib.request.Request(f"{self.root}/reset_prefix_cache", data=b"", method="POST")
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    log.info("reset_prefix_cache: HTTP %s", resp.status)
            except OSError as exc:
                log.warning("reset_prefix_cache failed: %s", exc)
            return super().run(requests, **kw)

    target_mod.HttpTarget = FreshCacheTarget  # type: ignore[misc]


class StudyState:
    """The searcher (pickled) and the finished trials under --state, so a later command continues."""

    def __init__(self, study: Study, space: Space, state: Path) -> None:
        self.study, self.space, self.state = study, space, state
        state.mkdir(parents=True, exist_ok=True)
        self.core_file, self.results_file = state / "search_core.pkl", state / "results.jsonl"
        self.results: list[TrialResult] = []
        if self.results_file.exists():
            for line in self.results_file.read_text().splitlines():
                d = json.loads(line)
                d["outcome"] = TrialOutcome(d["outcome"])
                self.results.append(TrialResult(**d))
        self.baseline_issued = any(r.baseline for r in self.results)
        search_core = _import_search_core()
        if self.core_file.exists():
            self.core = pickle.loads(self.core_file.read_bytes())
        else:
            self.core = search_core(study, space)

    def add(self, result: TrialResult) -> None:
        self.results.append(result)
        with self.results_file.open("a") as f:
            f.write(json.dumps(result.to_json(), default=str) + "\n")
        tmp = self.core_file.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(self.core))
        os.replace(tmp, self.core_file)


def next_plan(st: StudyState, queued: list[dict[str, Any]]) -> TrialPlan | None:
    """The searcher's next config (baseline first); `queued` configs are offered to Optuna before TPE.

    They are enqueued only once the baseline has been handed out (its own ask takes the queue's head),
    and configs already tried in an earlier command are skipped by Optuna (skip_if_exists).
    """
    if st.baseline_issued or not st.study.search.baseline_first:
        engine = st.study.engine_names[0]
        for cfg in queued:
            st.core.optuna.enqueue_trial({f"{engine}.{k}": v for k, v in cfg.items()}, skip_if_exists=True)
        queued.clear()
    cfg = st.core.ask()
    if cfg is None:
        return None
    number = cfg.number
    st.baseline_issued = st.baseline_issued or cfg.baseline
    return TrialPlan(trial_id=f"t{number:03d}", number=number, engine=cfg.engine, args=dict(cfg.args),
                     params=dict(cfg.params), baseline=cfg.baseline, seed=st.study.seed, notes=list(cfg.notes))


def run_one(study_path: str, plan: TrialPlan, tdir: str, gpu: int) -> TrialResult:
    """One trial on one GPU, in its own process: sampled while it runs, checked free after it.

    A process per trial (not a thread): each trial's load generator streams thousands of tokens per
    second, and two of them sharing one interpreter's GIL would add client-side delay to the very
    latencies they measure. The process pins the trial's server to `gpu` through tuner.trial.runner's
    GPU lookup, which under Ray returns the GPUs Ray assigned.
    """
    import tuner.trial.runner

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s gpu{gpu} %(name)s: %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout)])
    tuner.trial.runner._gpu_ids = lambda: [gpu]  # type: ignore[assignment]
    study = load_study(Path(study_path))
    if study.engine_names[0] == "vllm":
        reset_prefix_cache_between_points()
    before = engine_gpu.snapshot([gpu])
    t0 = time.time()
    with GpuSampler(index=gpu, period_s=0.5) as sampler:
        result = run_trial(study, plan, Path(tdir), base_dir=REPO)
    free, detail = engine_gpu.wait_free([gpu], baseline=before, timeout_s=90)
    result.notes.append(f"gpu {gpu}; ran {t0:.0f}-{time.time():.0f} (epoch s)")
    result.notes.append(f"gpu free after stop: {free} ({detail}); now {json.dumps(_short(gpu_state(gpu)))}")
    result.metrics.update(sampler.summary())
    (Path(tdir) / "gpu_samples.json").write_text(json.dumps(sampler.samples))
    if not free:
        raise RuntimeError(f"GPU {gpu} not free after trial {plan.number}: {detail}")
    return result


def tell(st: StudyState, plan: TrialPlan, result: TrialResult) -> None:
    st.core.tell(plan.number, TrialReport.of(st.study, result))


class ProcessExecutor:
    """A spawned process per trial; this driver hands each trial a free GPU index."""

    def __init__(self, gpus: list[int]) -> None:
        self.free = list(gpus)
        self.pool = ProcessPoolExecutor(max_workers=len(gpus), mp_context=multiprocessing.get_context("spawn"),
                                        max_tasks_per_child=1)
        self.running: dict[Future[TrialResult], TrialPlan] = {}
        self.gpu_of: dict[Future[TrialResult], int] = {}

    def has_slot(self) -> bool:
        return bool(self.free)

    def submit(self, study: str, plan: TrialPlan, tdir: str) -> None:
        gpu = self.free.pop(0)
        log.info("trial %d on GPU %d%s args=%s", plan.number, gpu, " (baseline)" if plan.baseline else "", plan.args)
        fut = self.pool.submit(run_one, study, plan, tdir, gpu)
        self.running[fut], self.gpu_of[fut] = plan, gpu

    def wait_any(self) -> list[tuple[TrialPlan, TrialResult]]:
        finished, _ = wait(self.running, return_when=FIRST_COMPLETED)
        self.free.extend(self.gpu_of.pop(f) for f in finished)
        return [(self.running.pop(f), f.result()) for f in finished]  # a GPU left busy raises here

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class RayExecutor:
    """A Ray task per trial on a local Ray instance that owns the GPUs: each task asks for num_gpus=1,
    Ray picks the GPU and sets CUDA_VISIBLE_DEVICES, and the trial reads its GPU back from
    ray.get_gpu_ids() (tuner.trial.runner._gpu_ids), as the pipeline's Tune trials do. max_calls=1 gives every
    trial a fresh worker process (its own interpreter and GIL for the load generator)."""

    def __init__(self, gpus: list[int]) -> None:
        import ray

        self.ray, self.slots = ray, len(gpus)
        # workers import tuner and gpu_sampler from the repo, wherever Ray starts them
        paths = [str(REPO), str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        ray.init(num_gpus=len(gpus), num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False,
                 object_store_memory=512 * 1024**2, log_to_driver=True, configure_logging=False)
        log.info("ray %s: %s", ray.__version__, ray.cluster_resources())
        self.task = ray.remote(num_gpus=1, num_cpus=1, max_calls=1, max_retries=0)(run_on_ray_gpu)
        self.running: dict[Any, TrialPlan] = {}

    def has_slot(self) -> bool:
        return len(self.running) < self.slots

    def submit(self, study: str, plan: TrialPlan, tdir: str) -> None:
        log.info("trial %d to Ray (num_gpus=1)%s args=%s", plan.number, " (baseline)" if plan.baseline else "",
                 plan.args)
        self.running[self.task.remote(str(Path(study).resolve()), plan, tdir)] = plan

    def wait_any(self) -> list[tuple[TrialPlan, TrialResult]]:
        ready, _ = self.ray.wait(list(self.running), num_returns=1)
        return [(self.running.pop(ref), self.ray.get(ref)) for ref in ready]  # a GPU left busy raises here

    def close(self) -> None:
        self.ray.shutdown()


def run_on_ray_gpu(study_path: str, plan: TrialPlan, tdir: str) -> TrialResult:
    """Inside a Ray worker: the trial on the GPU Ray assigned to this task."""
    import ray

    os.chdir(REPO)
    gpu = int(ray.get_gpu_ids()[0])
    return run_one(study_path, plan, tdir, gpu)


def run_trials(st: StudyState, args: argparse.Namespace, gpus: list[int], queued: list[dict[str, Any]],
               trials_dir: Path, log_file: Path) -> float:
    """Keep every GPU busy with one trial each until --trials ran or the next would pass --deadline."""
    done_walls = [r.wall_s for r in st.results if r.outcome.ran]
    started = 0
    stopping = False
    t_start = time.time()
    ex = RayExecutor(gpus) if args.executor == "ray" else ProcessExecutor(gpus)
    try:
        while True:
            while ex.has_slot() and not stopping and started < args.trials:
                estimate = max(done_walls) if done_walls else args.trial_estimate_s
                left = args.deadline - time.time()
                if left < estimate:
                    log.info("stop: %.0f s left, a trial is estimated at %.0f s", left, estimate)
                    stopping = True
                    break
                plan = next_plan(st, queued)
                if plan is None:
                    log.info("stop: the searcher has no config left worth launching")
                    stopping = True
                    break
                ex.submit(str(args.study), plan, str(trials_dir / f"{plan.number:03d}-{plan.trial_id}"))
                started += 1
            if not ex.running:
                break
            for plan, result in ex.wait_any():
                tell(st, plan, result)
                st.add(result)
                if result.outcome.ran:
                    done_walls.append(result.wall_s)
                log.info("trial %d: %s capacity=%s objective=%s start_s=%s wall_s=%.0f reason=%s", result.number,
                         result.outcome.value, result.capacity, result.objective, result.start_s, result.wall_s,
                         result.reason)
                pack(st, trials_dir, args.out, log_file, elapsed_s=time.time() - t_start, gpus=gpus,
                     executor=args.executor)
    finally:
        ex.close()
    return time.time() - t_start


def _short(state: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in state.items()}


def pack(st: StudyState, trials_dir: Path, out: Path, log_file: Path, elapsed_s: float = 0.0,
         gpus: list[int] | None = None, executor: str = "process") -> None:
    """Everything so far into --out: trials.parquet, summary.json, and one tarball of the trial folders."""
    out.mkdir(parents=True, exist_ok=True)
    write_trials(out / "trials.parquet", st.results)
    summary = {
        "study": st.study.name,
        "gpus": gpus or [],
        "executor": executor,
        "this_command_trials_elapsed_s": round(elapsed_s, 1),
        "trials": [{"number": r.number, "outcome": r.outcome.value, "baseline": r.baseline, "args": r.args,
                    "capacity": r.capacity, "objective": r.objective, "start_s": r.start_s, "wall_s": r.wall_s,
                    "reason": r.reason, "points": [{k: p.get(k) for k in ("load", "feasible", "p99_ttft_ms",
                                                                          "p99_tpot_ms", "output_throughput")}
                                                   for p in r.points]}
                   for r in st.results],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    tmp = out / ".trials.tar.gz"
    with tarfile.open(tmp, "w:gz") as tar:
        if trials_dir.exists():
            tar.add(trials_dir, arcname="trials")
        for f, name in ((st.results_file, "results.jsonl"), (log_file, "driver.log")):
            if f.exists():
                tar.add(f, arcname=name)
    os.replace(tmp, out / "trials.tar.gz")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.state.mkdir(parents=True, exist_ok=True)
    log_file = args.state / "driver.log"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(log_file)])
    study = load_study(args.study)
    space = build_space(study, REPO)
    st = StudyState(study, space, args.state)
    trials_dir = args.state / "trials"
    queued = json.loads(args.enqueue) if args.enqueue else []
    gpus = list(range(args.gpus if args.gpus else max(1, gpu_count())))
    log.info("study %s: %d trials already done; GPUs %s; deadline in %.0f s", study.name, len(st.results), gpus,
             args.deadline - time.time())
    elapsed = run_trials(st, args, gpus, queued, trials_dir, log_file)
    pack(st, trials_dir, args.out, log_file, elapsed_s=elapsed, gpus=gpus, executor=args.executor)
    return 0


if __name__ == "__main__":
    sys.exit(main())
