"""The arguments every servetune Serve builder takes (the ``args:`` block of promoted.yaml).

One strict model for all engines, so a hand-edited promoted.yaml with a typo fails at deploy time
with the key's name instead of silently serving a different config.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tuner.engines.registry import engine_class, names
from tuner.spec.strict import (
    Strict,  # the studies' rules: unknown keys, true/false as numbers, inf/nan refused
)
from tuner.spec.study import EngineSettings, ModelSpec, SimSettings


class Autoscaling(Strict):
    """Ray Serve autoscaling_config fields we set (target = in-flight requests one replica holds within SLA)."""

    min_replicas: int = Field(ge=0)
    initial_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int = Field(gt=0)
    target_ongoing_requests: float = Field(gt=0)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas <= max_replicas must hold, but got {self.min_replicas} > {self.max_replicas}"
            )
        return self


class DeploymentArgs(Strict):
    """Serve deployment options derived from the measured capacity (see tuner.promote.serve_config)."""

    max_ongoing_requests: int = Field(gt=0)
    autoscaling_config: Autoscaling
    num_cpus: float = Field(default=1.0, ge=0)
    health_check_period_s: float = Field(default=10.0, gt=0)
    health_check_timeout_s: float = Field(default=30.0, gt=0)

    def serve_options(self) -> dict[str, Any]:
        """Keyword arguments for `serve.deployment(...).options(...)` / LLMConfig.deployment_config."""
        return {
            "max_ongoing_requests": self.max_ongoing_requests,
            "autoscaling_config": self.autoscaling_config.model_dump(exclude_none=True),
            "health_check_period_s": self.health_check_period_s,
            "health_check_timeout_s": self.health_check_timeout_s,
        }


class AppArgs(Strict):
    """Everything a builder needs: the tuned engine arguments plus where they came from."""

    engine: str  # a registered engine (tuner.engines.registry)
    model: ModelSpec
    engine_args: dict[str, Any]  # the tuned arguments, exactly as the winning trial launched them
    deployment: DeploymentArgs
    sim: SimSettings | None = None  # only for engine "sim"
    accelerator_type: str | None = None  # Ray accelerator type, e.g. "H200" (GPU engines)
    start_timeout_s: float = Field(default=600, gt=0)
    lineage: dict[str, str] = {}  # study, trial and registry ids, served back on GET /servetune
    # How a real engine is served: "ray_llm" (Ray Serve LLM runs it in the replica), "process" (the replica
    # runs the engine's own OpenAI server, as a trial did: serve_apps.engine_process), "auto" (ray_llm when
    # Ray Serve LLM can load the installed engine, else process)
    server: Literal["auto", "ray_llm", "process"] = "auto"
    engine_settings: EngineSettings | None = None  # the study's interpreter, env and timeouts (real engines)
    workdir: str | None = None  # where the study ran: relative model and interpreter paths resolve there
    # Ray GPUs per engine GPU when the app shares its GPU with another app (tuner.promote.failover
    # --share-gpu on a one-GPU host); None: whole GPUs, as the trials held them
    gpu_fraction: float | None = Field(default=None, gt=0, lt=1)

    @field_validator("engine")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in names():
            raise ValueError(f"unknown engine {v!r}; use one of {names()}")
        return v

    @model_validator(mode="after")
    def _sim_only(self) -> AppArgs:
        simulated = engine_class(self.engine).simulated
        if simulated and self.sim is None:
            raise ValueError(f"engine {self.engine!r} needs a 'sim' block (flavour, gpu, time_scale)")
        if not simulated and self.sim is not None:
            raise ValueError(f"a 'sim' block is only valid with a simulated engine, not {self.engine!r}")
        if simulated and self.engine_settings is not None:
            raise ValueError(f"'engine_settings' is for a real engine; engine {self.engine!r} takes a 'sim' block")
        return self


def parse_args(args: dict[str, Any] | AppArgs) -> AppArgs:
    """Validate builder args coming from a Serve config file."""
    return args if isinstance(args, AppArgs) else AppArgs.model_validate(args)
