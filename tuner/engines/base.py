"""The engine protocol: everything servetune needs to know about an inference engine.

One implementation per engine (vllm, sglang, sim), registered by name in tuner.engines. A trial
turns its config into an argument list with `argv`, launches it with the shared ServerProcess
helper (tuner.engines.process), and asks `classify` what a failure means.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tuner.spec.study import EngineSettings, ModelSpec, SimSettings
from tuner.trial.outcome import TrialOutcome

if TYPE_CHECKING:
    import socket

    from tuner.engines.process import ServerProcess


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


def flag(name: str) -> str:
    """snake_case parameter name -> command-line flag (max_num_seqs -> --max-num-seqs)."""
    return "--" + name.replace("_", "-")


class Engine(ABC):
    name: ClassVar[str]
    metrics_prefix: ClassVar[str]  # "vllm:" or "sglang:"
    fatal_start: ClassVar[re.Pattern[str] | None] = None  # a log line meaning "start failed for good"

    @abstractmethod
    def argv(self, args: Mapping[str, Any], launch: LaunchSpec) -> list[str]:
        """The full command line (never a shell string) for a config."""

    def env(self, launch: LaunchSpec) -> dict[str, str]:
        """Extra environment for the server process."""
        return dict(getattr(launch.settings, "env", {}) or {})

    def check_args(self, args: Mapping[str, Any], launch: LaunchSpec | None = None) -> None:  # noqa: B027
        """Raise SpecError for an unknown or invalid argument (checked against the engine's parser when importable)."""

    @abstractmethod
    def classify(self, returncode: int | None, log_tail: str) -> tuple[TrialOutcome, str]:
        """Map a failed start or run to an outcome and a one-line reason quoting the engine."""

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        """What the engine really runs with, read back from the server when it offers it."""
        return {}

    def metrics_prefix_for(self, launch: LaunchSpec) -> str:
        """The /metrics name prefix of this launch (the sim engine imitates vLLM or SGLang)."""
        return self.metrics_prefix

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
