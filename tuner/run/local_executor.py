"""The `local` executor: trials as plain subprocesses on this host, side by side, one per GPU. No Ray.

For a GPU host without Ray (or a laptop). The driver asks the search core for configs, hands each
trial its GPUs (CUDA_VISIBLE_DEVICES, from the driver's own CUDA_VISIBLE_DEVICES or NVML's count) and
starts `python -m tuner.trial.worker` in its own process group; on the simulated engine, trials hold no
GPU and `budget.max_concurrent` of them run at once. A trial process that dies without a result fails
its trial (crashed), one past `resources.trial_timeout_s` is stopped and fails it (timeout); the study
goes on. A signal, a fault or the time budget stops the running trials, which are not recorded (as under
Ray Tune: `--resume` runs them again).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from tuner.common.errors import SpecError
from tuner.common.redact import redact_text
from tuner.engines import gpu
from tuner.run.executor import SearchJob
from tuner.run.resources import check_fit, layout_gpus, trial_resources
from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.search.signals import Interrupt
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult
from tuner.trial.runner import GPUS_ENV, TrialPlan, trial_dir
from tuner.trial.worker import RESULT

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
STOP_GRACE_S = 15.0  # SIGTERM -> SIGKILL: time for a trial to stop its engine server
POLL_S = 0.05


def host_gpus() -> list[int]:
    """GPU indices trials may use: the driver's CUDA_VISIBLE_DEVICES when set, else every GPU NVML sees."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids: list[int] = []
        for item in (x.strip() for x in env.split(",")):
            if not item:
                continue
            if not item.lstrip("-").isdigit():
                raise SpecError(f"CUDA_VISIBLE_DEVICES={env!r} names GPUs by UUID", "CUDA_VISIBLE_DEVICES",
                                "list GPU indices (e.g. 0,1) for the local executor")
            if int(item) < 0:
                break  # CUDA ignores the entries after an invalid one
            ids.append(int(item))
        return ids
    return list(range(gpu.count()))


@dataclass
class _Proc:
    cfg: Suggestion
    plan: TrialPlan
    proc: subprocess.Popen[bytes]
    gpus: list[int]
    tdir: Path
    log: IO[bytes]
    t0: float  # monotonic
    started_at: float  # epoch


class LocalExecutor:
    """Trials as local subprocesses; GPUs handed out here."""

    name = "local"

    def __init__(self) -> None:
        self.gpus: list[int] = []

    def start(self, study: Study, *, verbose: bool) -> None:
        self.gpus = host_gpus()

    def helper_pids(self) -> tuple[list[int], str]:
        return [], ""

    def cluster_gpus(self) -> float:
        return float(len(self.gpus))

    def fit(self, study: Study, max_concurrent: int) -> int:
        res = trial_resources(study, study.engine_names[0], len(self.gpus))
        return check_fit(res, len(self.gpus), float(os.cpu_count() or 1), max_concurrent, "this host")

    # ------------------------------------------------------------------ the search

    def run(self, job: SearchJob) -> None:
        study = job.study
        base_gpus = trial_resources(study, study.engine_names[0], len(self.gpus))["gpu"]
        deadline = time.monotonic() + study.budget.time_limit_s if study.budget.time_limit_s else None
        free = list(self.gpus)
        running: dict[int, _Proc] = {}
        launched, exhausted = 0, False
        pending: Suggestion | None = None  # asked, waiting for enough free GPUs
        try:
            while Interrupt.signum is None and Interrupt.failure is None:
                if deadline is not None and time.monotonic() >= deadline:
                    log.warning("time budget of %g s reached: stopping %d running trial(s)",
                                study.budget.time_limit_s, len(running))
                    break
                while not exhausted and len(running) < job.max_concurrent and launched < job.trials:
                    cfg, pending = pending or job.core.ask(), None
                    if cfg is None:
                        exhausted = True
                        break
                    need = math.ceil(layout_gpus(study, base_gpus, cfg.args))
                    if need > len(self.gpus):
                        launched += 1
                        self._finish(job, cfg, self._unrunnable(job, cfg, need))
                        continue
                    if need > len(free):
                        pending = cfg
                        break
                    gpus, free = free[:need], free[need:]
                    plan = self._plan(job, cfg)
                    running[cfg.number] = self._spawn(cfg, plan, gpus, job.data, job.out, job.base_dir)
                    job.recorder.started(plan.trial_id, cfg.engine, cfg.params)
                    launched += 1
                if not running:
                    break
                for number, p in list(running.items()):
                    result = self._poll(p, study)
                    if result is not None:
                        del running[number]
                        free = sorted(free + p.gpus)
                        self._finish(job, p.cfg, result)
                time.sleep(POLL_S)
        except BaseException:  # a second Ctrl-C (KeyboardInterrupt) or a driver fault: stop them now
            for p in running.values():
                _stop(p, grace_s=1.0)
            raise
        for p in running.values():  # interrupted, out of time, or a fault: stopped, not recorded
            _stop(p)

    def _plan(self, job: SearchJob, cfg: Suggestion) -> TrialPlan:
        trial_id = secrets.token_hex(4)
        job.core.bind(cfg.number, trial_id)
        return TrialPlan(trial_id=trial_id, number=cfg.number, engine=cfg.engine, args=cfg.args, params=cfg.params,
                         baseline=cfg.baseline, seed=job.study.seed, notes=list(cfg.notes), incumbent=cfg.incumbent,
                         incumbent_capacity=cfg.incumbent_capacity)

    def _spawn(self, cfg: Suggestion, plan: TrialPlan, gpus: list[int], data: dict[str, Any], out: Path,
               base_dir: Path) -> _Proc:
        """`python -m tuner.trial.worker` for one trial, in its own process group, on `gpus`."""
        tdir = trial_dir(out, plan.number, plan.trial_id)
        tdir.mkdir(parents=True, exist_ok=True)
        path = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""),
               GPUS_ENV: ",".join(map(str, gpus))}
        if gpus or self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))  # "" for a trial without GPUs on a GPU host
        logf = open(tdir / "worker.log", "wb")  # closed when the trial is collected
        proc = subprocess.Popen([sys.executable, "-m", "tuner.trial.worker"], stdin=subprocess.PIPE, stdout=logf,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        payload = {"study": data, "plan": asdict(plan), "trial_dir": str(tdir), "base_dir": str(base_dir)}
        assert proc.stdin is not None
        try:  # the study (engine env values may be secrets) travels by pipe, never through a file
            proc.stdin.write(json.dumps(payload, default=str).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died at once: collected as crashed
        return _Proc(cfg=cfg, plan=plan, proc=proc, gpus=gpus, tdir=tdir, log=logf, t0=time.monotonic(),
                     started_at=time.time())

    def _poll(self, p: _Proc, study: Study) -> TrialResult | None:
        """The trial's result once its process ended (or hung past the limit), else None."""
        rc = p.proc.poll()
        limit = study.resources.trial_timeout_s
        hung = rc is None and limit is not None and time.monotonic() - p.t0 > limit
        if rc is None and not hung:
            return None
        if hung:
            _stop(p)
        p.log.close()
        path = p.tdir / RESULT
        if not hung and rc == 0 and path.exists():
            return TrialResult.from_json(json.loads(path.read_text()))
        if hung:
            outcome, reason = TrialOutcome.TIMEOUT, (f"trial process hung: no result after {limit:g} s "
                                                     "(resources.trial_timeout_s); stopped")
        else:
            outcome, reason = TrialOutcome.CRASHED, f"trial process {_exit(rc)} before reporting a result{_tail(p)}"
        return TrialResult(trial_id=p.plan.trial_id, number=p.plan.number, engine=p.plan.engine,
                           params=p.plan.params, args=p.plan.args, outcome=outcome, reason=reason,
                           baseline=p.plan.baseline, seed=p.plan.seed, notes=list(p.plan.notes), gpus=p.gpus,
                           started_at=p.started_at, ended_at=time.time(), wall_s=time.monotonic() - p.t0,
                           log_path=str(p.tdir / "worker.log"))

    def _unrunnable(self, job: SearchJob, cfg: Suggestion, need: int) -> TrialResult:
        plan = self._plan(job, cfg)
        return TrialResult(trial_id=plan.trial_id, number=cfg.number, engine=cfg.engine, params=cfg.params,
                           args=cfg.args, outcome=TrialOutcome.START_FAILED, baseline=cfg.baseline, seed=plan.seed,
                           reason=f"needs {need} GPU(s); the local executor has {len(self.gpus)}")

    @staticmethod
    def _finish(job: SearchJob, cfg: Suggestion, result: TrialResult) -> None:
        """As under Ray Tune: trials.parquet, then Optuna, then MLflow and the progress line."""
        job.recorder.persist(result)
        job.core.tell(cfg.number, TrialReport.of(job.study, result))
        job.recorder.record(result)

    # ------------------------------------------------------------------ promotion

    def confirmer(self, study: Study, data: dict[str, Any], out: Path,
                  base_dir: Path) -> Callable[[TrialResult, int], TrialResult]:
        """Re-run a trial's config with another workload seed, in a worker process holding its GPUs."""
        def confirm(trial: TrialResult, seed: int) -> TrialResult:
            need = math.ceil(layout_gpus(study, trial_resources(study, trial.engine, len(self.gpus))["gpu"], trial.args))
            plan = TrialPlan(trial_id=f"{trial.trial_id}-c{seed}", number=trial.number, engine=trial.engine,
                             args=trial.args, params=trial.params, seed=seed)
            cfg = Suggestion(number=trial.number, engine=trial.engine, params=trial.params, args=trial.args)
            p = self._spawn(cfg, plan, self.gpus[:need], data, out, base_dir)
            while (result := self._poll(p, study)) is None:
                if Interrupt.signum is not None:
                    _stop(p)
                    raise KeyboardInterrupt
                time.sleep(POLL_S)
            return result

        return confirm


def _stop(p: _Proc, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the trial's process group (its engine server included), SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if p.proc.poll() is not None:
            break
        try:
            os.killpg(p.proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    if not p.log.closed:
        p.log.close()


def _exit(rc: int | None) -> str:
    if rc is not None and rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def _tail(p: _Proc, lines: int = 3) -> str:
    try:
        text = (p.tdir / "worker.log").read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return f": {redact_text(' | '.join(text))[:500]}" if text else ""
