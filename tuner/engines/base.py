"""The engine protocol: everything servetune needs to know about an inference engine.

One module per engine (vllm, sglang, sim) is that engine's only home, registered by name in
tuner.engines.registry. It owns the argument mapping (trial + model spec -> the engine's own
arguments, used for the launch argv AND the Ray Serve app, so what is served is what was measured),
the knobs whose larger values need more memory, the /metrics names, the failure patterns, the Serve
builder and the search-space file. Everything else asks the registry; see docs/architecture.md.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tuner.engines import failures
from tuner.spec.study import EngineSettings, ModelSpec, SimSettings
from tuner.trial.outcome import TrialOutcome

if TYPE_CHECKING:
    import socket

    from tuner.engines.process import ServerProcess
    from tuner.spec.study import Study

SPACES_DIR = Path(__file__).resolve().parents[2] / "search_spaces"
# probe sample key -> the engine's /metrics names (without prefix), first found wins
MetricNames = Mapping[str, tuple[str, ...]]


@dataclass
class LaunchSpec:
    """Where and how one engine server starts."""

    model: ModelSpec
    host: str
    port: int
    log_path: Path
    settings: EngineSettings | SimSettings
    gpu_ids: list[int] = field(default_factory=list)
    port_socket: socket.socket | None = None  # from tuner.engines.process.reserve_port: held until ready

    @classmethod
    def for_check(cls, model: ModelSpec, settings: EngineSettings | SimSettings) -> LaunchSpec:
        """A launch that only names the interpreter and model, for check_args before any port exists."""
        return cls(model=model, host=getattr(settings, "host", "127.0.0.1"), port=0, log_path=Path("engine.log"),
                   settings=settings)


def user_dir() -> str | None:
    """Where the user started servetune. Ray Tune moves each trial into its own folder (and says where
    it came from in TUNE_ORIG_WORKING_DIR); engines start from the user's folder, so relative model and
    interpreter paths in a study mean what the user meant."""
    return os.environ.get("TUNE_ORIG_WORKING_DIR") or None


class Engine(ABC):
    name: ClassVar[str]
    metrics_prefix: str  # "vllm:" or "sglang:" (a class default; the sim sets its flavour's per launch)
    metric_names: ClassVar[MetricNames] = {}  # running, waiting, kv_cache_usage, preemptions
    fatal_start: ClassVar[re.Pattern[str] | None] = None  # a log line meaning "start failed for good"
    patterns: ClassVar[tuple[failures.Pattern, ...]] = failures.COMMON  # log line -> outcome, in order
    memory_knobs: ClassVar[tuple[str, ...]] = ()  # knobs whose larger values need more GPU memory
    uses_gpu: ClassVar[bool] = True  # a trial holds GPUs (tensor parallel size by default)
    simulated: ClassVar[bool] = False  # a model of an engine (pre-screening a simulated study is pointless)
    serve_builder: ClassVar[str | None] = None  # Ray Serve builder import path for a promoted config
    space_file: ClassVar[Path | None] = None  # its search space; None: search_spaces/<flavour>.yaml

    # -- what a study needs to know -------------------------------------------------------------
    def flavour(self, study: Study) -> str:
        """The engine whose knobs this one takes (the sim imitates vllm or sglang)."""
        return self.name

    def space_path(self, study: Study) -> Path:
        return self.space_file or SPACES_DIR / f"{self.flavour(study)}.yaml"

    def run_settings(self, study: Study) -> EngineSettings | SimSettings:
        """How the study runs this engine (interpreter, env, deadlines)."""
        return study.engines.get(self.name) or EngineSettings()

    def preflight(self, study: Study) -> None:  # noqa: B027 - optional hook
        """Raise SpecError for a study this engine cannot run (checked before anything starts)."""

    def runs_virtual(self, study: Study) -> bool:
        """True when trials run in-process on the simulator's virtual clock instead of a server."""
        return False

    def memory_knobs_for(self, flavour: str) -> tuple[str, ...]:
        return self.memory_knobs

    def engine_args(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        """The engine's own arguments (its snake_case names) for a model and a trial's args.

        The one mapping behind both the launch argv and the Serve app's engine kwargs."""
        return dict(args)

    def serve_kwargs(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        """Engine kwargs of the Ray Serve LLM app that serves the config a trial measured."""
        raise NotImplementedError(f"{self.name} has no Ray Serve LLM app")

    @abstractmethod
    def argv(self, args: Mapping[str, Any], launch: LaunchSpec) -> list[str]:
        """The full command line (never a shell string) for a config."""

    def env(self, launch: LaunchSpec) -> dict[str, str]:
        """Extra environment for the server process."""
        return dict(getattr(launch.settings, "env", {}) or {})

    def check_args(self, args: Mapping[str, Any], launch: LaunchSpec | None = None) -> None:  # noqa: B027
        """Raise SpecError for an unknown or invalid argument (checked against the engine's parser when importable)."""

    def classify(self, returncode: int | None, log_tail: str) -> tuple[TrialOutcome, str]:
        """Map a failed start or run to an outcome and a one-line reason quoting the engine."""
        return failures.classify(returncode, log_tail, self.patterns)

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        """What the engine really runs with, read back from the server when it offers it."""
        return {}

    def metrics_prefix_for(self, launch: LaunchSpec) -> str:
        """The /metrics name prefix of this launch (the sim engine imitates vLLM or SGLang)."""
        return self.metrics_prefix

    def metric_names_for(self, launch: LaunchSpec) -> MetricNames:
        return self.metric_names

    def server(
        self, args: Mapping[str, Any], launch: LaunchSpec, *, port_socket: socket.socket | None = None
    ) -> ServerProcess:
        """The engine's server for one trial, as a context manager: `with engine.server(a, l) as srv:`.

        port_socket (or launch.port_socket): the socket reserve_port returned; held until ready.
        """
        from tuner.engines.process import ServerProcess

        settings = launch.settings
        return ServerProcess(
            self.argv(args, launch),
            env=self.env(launch),
            log_path=launch.log_path,
            host=launch.host,
            port=launch.port,
            ready_timeout_s=float(getattr(settings, "start_timeout_s", 120)),
            stop_timeout_s=float(getattr(settings, "stop_timeout_s", 30)),
            classify=self.classify,
            port_socket=port_socket if port_socket is not None else launch.port_socket,
            gpu_ids=launch.gpu_ids,
            fatal=self.fatal_start,
            cwd=user_dir(),
        )
