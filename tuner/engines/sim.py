"""The simulated engine's server face: `python -m tuner.sim.server` launched like a real engine.

It runs through the same ServerProcess, readiness, metrics and failure paths as vLLM and SGLang,
so the whole pipeline can be exercised without a GPU. It imitates one real engine (the flavour):
its flags, its /metrics names ("vllm:" or "sglang:") and its failure messages. Test faults come
from SimSettings.faults and become `--fault-*` flags.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.engines import args as cli
from tuner.engines import failures
from tuner.engines.base import Engine, LaunchSpec, MetricNames
from tuner.engines.process import http_get
from tuner.engines.registry import engine_class
from tuner.spec.study import EngineSettings, SimSettings, Study
from tuner.trial.outcome import TrialOutcome

PREFIXES = {"vllm": "vllm:", "sglang": "sglang:"}
# fault name -> value kind: switches take true/false, the rest a number
FAULTS: dict[str, type] = {
    "fail_at_start": bool,
    "never_ready": bool,
    "oom_at_start": bool,
    "crash_after": int,
    "hang_after": int,
    "stall_after": int,
    "http500_rate": float,
}
_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the tuner package


def fault_flags(faults: Mapping[str, Any]) -> list[str]:
    """SimSettings.faults -> --fault-* flags; unknown faults or bad values are bad input."""
    out: list[str] = []
    for name, value in faults.items():
        kind = FAULTS.get(name)
        where = f"sim.faults.{name}"
        if kind is None:
            raise SpecError(f"unknown sim fault {name!r}", where, f"use one of {sorted(FAULTS)}")
        if kind is bool:
            if not isinstance(value, bool):
                raise SpecError(f"{name} must be true or false, got {value!r}", where, "write true or false")
            if value:
                out.append("--fault-" + name.replace("_", "-"))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SpecError(f"{name} must be a number >= 0, got {value!r}", where, "give a count or a rate")
        if kind is int and not float(value).is_integer():
            raise SpecError(f"{name} must be a whole number, got {value!r}", where, "give a request count")
        out += ["--fault-" + name.replace("_", "-"), str(kind(value))]
    return out


class SimEngine(Engine):
    """Everything flavour-specific (knob names, memory knobs, /metrics names, failure messages) is the
    imitated engine's, asked from its own home; the sim adds its server, GPU model and faults."""

    name = "sim"
    metrics_prefix = "vllm:"  # set per launch to the flavour's prefix (see metrics_prefix_for)
    uses_gpu = False
    simulated = True
    serve_builder = "serve_apps.sim:build_app"

    def __init__(self, flavour: str = "vllm") -> None:
        self.metrics_prefix = PREFIXES.get(flavour, "vllm:")

    def flavour(self, study: Study) -> str:
        return study.sim.flavour

    def run_settings(self, study: Study) -> EngineSettings | SimSettings:
        return study.sim

    def runs_virtual(self, study: Study) -> bool:
        return study.sim.mode == "virtual"

    def preflight(self, study: Study) -> None:
        """The model's shape, the GPU and the faults must be ones the simulator knows."""
        from tuner.sim import known_gpus, known_shapes, shape_for

        if study.model.shape is not None:
            if study.model.shape not in known_shapes():  # an explicit shape is used as is: no guessing
                raise SpecError(f"unknown simulator shape {study.model.shape!r}", "model.shape",
                                f"use one of {known_shapes()}")
        else:
            try:
                shape_for(study.model.name)
            except SpecError as exc:
                raise SpecError(exc.what, "model.name", f"set model.shape to one of {known_shapes()}") from None
        if study.sim.gpu not in known_gpus():
            raise SpecError(f"unknown GPU {study.sim.gpu!r} for the simulator", "sim.gpu",
                            f"use one of {known_gpus()}")
        fault_flags(study.sim.faults)

    def memory_knobs_for(self, flavour: str) -> tuple[str, ...]:
        return engine_class(flavour).memory_knobs

    def metric_names_for(self, launch: LaunchSpec) -> MetricNames:
        return engine_class(self.settings(launch).flavour).metric_names

    @staticmethod
    def settings(launch: LaunchSpec | None) -> SimSettings:
        s = launch.settings if launch is not None else None
        return s if isinstance(s, SimSettings) else SimSettings()

    def metrics_prefix_for(self, launch: LaunchSpec) -> str:
        return PREFIXES[self.settings(launch).flavour]

    def shape(self, launch: LaunchSpec) -> str:
        if launch.model.shape:
            return launch.model.shape
        from tuner.sim import shape_for

        return shape_for(launch.model.name)

    def argv(self, args: Mapping[str, Any], launch: LaunchSpec) -> list[str]:
        s = self.settings(launch)
        self.metrics_prefix = PREFIXES[s.flavour]  # the pipeline reads engine.metrics_prefix after launch
        bad = cli.bad_names(args)
        if bad:
            raise SpecError(f"sim argument names must be snake_case, got {bad}", "search space",
                            "write engine arguments as snake_case names, e.g. max_num_seqs")
        base = [
            sys.executable, "-m", "tuner.sim.server",
            "--model", launch.model.name, "--served-model-name", launch.model.client_name,
            "--host", launch.host, "--port", str(launch.port),
            "--flavour", s.flavour, "--gpu", s.gpu, "--shape", self.shape(launch),
            "--max-model-len", str(launch.model.max_model_len), "--time-scale", repr(float(s.time_scale)),
        ]
        # vLLM's flags are BooleanOptionalAction (--no-x); SGLang's are store_true (False = absent).
        flags = cli.cli_flags(args, lambda _name: s.flavour == "vllm")
        hf = s.host_factors
        host = ["--host-launch", repr(float(hf.launch)), "--host-step", repr(float(hf.step))] if hf else []
        return base + host + flags + fault_flags(s.faults)

    def env(self, launch: LaunchSpec) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": str(_ROOT) + (os.pathsep + path if path else "")}

    def check_args(self, args: Mapping[str, Any], launch: LaunchSpec | None = None) -> None:
        """Names and types against the simulator's knob table (the same the sim server enforces)."""
        from tuner.sim.knobs import resolve_args

        s = self.settings(launch)
        if launch is None:
            resolve_args(s.flavour, s.gpu, "", 8192, args)
            return
        resolve_args(s.flavour, s.gpu, self.shape(launch), launch.model.max_model_len, args)
        fault_flags(s.faults)

    def classify(self, returncode: int | None, log_tail: str) -> tuple[TrialOutcome, str]:
        flavour = "sglang" if "sglang" in self.metrics_prefix else "vllm"
        return failures.classify(returncode, log_tail, engine_class(flavour).patterns)

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        import json

        status, body = http_get(base_url + "/server_info", timeout_s=30)
        if status != 200:
            return {}
        try:
            data = json.loads(body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
