"""What vLLM and SGLang share: an interpreter, the argument mapping, the argument check.

A real engine is `<python> -m <module> <identity flags> <engine args>` (or a user's command prefix
instead of `<python> -m <module>`). The engine args are `engine_args(model, trial args)`: the model
spec's settings under the engine's own names, overridden by the trial where it sets them (a search
space may tune max_model_len, dtype, tensor parallel size, load format), never the identity flags
servetune owns (model, host, port, served name). The Serve app is built from the same mapping.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

from tuner.common.errors import SpecError
from tuner.engines import args as cli
from tuner.engines.base import Engine, LaunchSpec, user_dir
from tuner.engines.process import http_get
from tuner.spec.study import EngineSettings, ModelSpec

log = logging.getLogger(__name__)

# Flags of the engines' HTTP front ends, not of the engine: Ray Serve LLM owns host, port and names.
FRONTEND_ONLY = frozenset({
    "host", "port", "served_model_name", "api_key", "uvicorn_log_level", "ssl_keyfile", "ssl_certfile",
    "root_path", "allowed_origins", "disable_uvicorn_access_log", "log_level",
})


class ServerEngine(Engine):
    """Base of the real engines; subclasses say their module, model flags and messages."""

    module: ClassVar[str]
    check_key: ClassVar[str]  # engine name the argument check script knows
    reserved: ClassVar[frozenset[str]]  # trial args servetune sets itself
    switches: ClassVar[frozenset[str]] = frozenset()  # known store_true flags (no --no- form)
    negatable_by_default: ClassVar[bool] = False
    renames: ClassVar[Mapping[str, str]] = {}  # vLLM-style names a study may share -> this engine's own
    tokenizer_arg: ClassVar[str] = "tokenizer"
    always: ClassVar[tuple[str, ...]] = ()  # flags every launch gets (e.g. SGLang's --enable-metrics)

    def __init__(self) -> None:
        self._kinds: dict[str, str] = {}  # learned from the engine's own parser: negatable/switch/value

    # -- what subclasses provide -----------------------------------------------------------
    def identity_flags(self, model: ModelSpec, launch: LaunchSpec | None) -> list[str]:
        """Model path, served name, host and port: set by servetune, never by a trial."""
        raise NotImplementedError

    # -- the one argument mapping ------------------------------------------------------------
    def rename(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return {self.renames.get(k, k): v for k, v in args.items()}

    def engine_args(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {"max_model_len": model.max_model_len, "dtype": model.dtype,
                                "tensor_parallel_size": model.tensor_parallel_size}
        if model.load_format:
            spec["load_format"] = model.load_format
        out = self.rename(spec)
        if model.tokenizer:
            out[self.tokenizer_arg] = model.tokenizer
        if model.trust_remote_code:
            out["trust_remote_code"] = True
        for k, v in self.rename(args).items():
            if v is None and k in out:
                continue  # None: the model spec's value stands
            out[k] = v
        return out

    def serve_kwargs(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        """The measured engine args minus the front-end flags Serve owns."""
        return {k: v for k, v in self.engine_args(model, args).items() if k not in FRONTEND_ONLY}

    # -- argv / env ------------------------------------------------------------------------
    @staticmethod
    def settings(launch: LaunchSpec | None) -> EngineSettings:
        s = launch.settings if launch is not None else None
        return s if isinstance(s, EngineSettings) else EngineSettings()

    def python(self, launch: LaunchSpec | None) -> str | None:
        """The engine's interpreter: settings.python, else ours unless a command prefix replaces it."""
        s = self.settings(launch)
        if s.python:
            # absolute for the log and for any cwd, but never resolved: a venv is known by its own path
            if os.sep not in s.python:  # a name looked up on PATH
                return s.python
            return os.path.abspath(os.path.join(user_dir() or os.getcwd(), s.python))
        return None if s.command else sys.executable

    def prefix(self, launch: LaunchSpec) -> list[str]:
        s = self.settings(launch)
        if s.command:
            return list(s.command)
        return [self.python(launch) or sys.executable, "-m", self.module]

    def negatable(self, name: str) -> bool:
        kind = self._kinds.get(name)
        if kind is not None:
            return kind == "negatable"
        return self.negatable_by_default and name not in self.switches

    def argv(self, args: Mapping[str, Any], launch: LaunchSpec) -> list[str]:
        self._check_names(args)
        flags = cli.cli_flags(self.engine_args(launch.model, args), self.negatable)
        return self.prefix(launch) + self.identity_flags(launch.model, launch) + flags + list(self.always)

    def env(self, launch: LaunchSpec) -> dict[str, str]:
        env: dict[str, str] = {}
        if launch.gpu_ids:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # so CUDA's numbering is NVML's (tuner.engines.gpu)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in launch.gpu_ids)
        env.update(self.settings(launch).env)
        return env

    # -- the argument check ------------------------------------------------------------------
    def _check_names(self, args: Mapping[str, Any]) -> None:
        bad = cli.bad_names(args)
        if bad:
            raise SpecError(f"{self.name} argument names must be snake_case, got {bad}", "search space",
                            "write engine arguments as snake_case names, e.g. max_num_seqs")
        owned = sorted(set(args) & self.reserved)
        if owned:
            raise SpecError(f"{owned} cannot be set per trial: servetune sets them from the study", "search space",
                            "set the model, its served name, host and port in the study's model/engines sections")

    def check_args(self, args: Mapping[str, Any], launch: LaunchSpec | None = None) -> None:
        """SpecError for an unknown or invalid argument, by the engine's own parser when importable."""
        self._check_names(args)
        s = self.settings(launch)
        python = self.python(launch)
        if not s.check_args or python is None:
            return
        base = self.identity_flags(launch.model, launch) + list(self.always) if launch is not None else []
        native = self.engine_args(launch.model, args) if launch is not None else self.rename(args)
        env = self.env(launch) if launch is not None else None
        answer = cli.checker(python, self.check_key, env).check(native, base)
        if answer.get("importable") is False:
            log.info("%s arguments not checked (%s is not usable from %s): %s", self.name, self.name, python,
                     answer.get("error"))
            return
        self._kinds.update(answer.get("kinds") or {})
        if not answer.get("ok"):
            key = answer.get("key")
            key = next((k for k in args if self.renames.get(k) == key), key)  # the name the user wrote
            where = f"args.{key}" if key else f"{self.name} arguments"
            shown = json.dumps(dict(args), default=str)
            raise SpecError(f"{answer.get('error')} (args {shown})", where,
                            f"use an argument name and value {self.name} accepts (see `{self.module} --help`)")

    # -- read-back ---------------------------------------------------------------------------
    @staticmethod
    def get_json(url: str, timeout_s: float = 30) -> dict[str, Any] | None:
        status, body = http_get(url, timeout_s)
        if status != 200:
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return data if isinstance(data, dict) else {"value": data}

