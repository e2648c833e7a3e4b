"""What vLLM and SGLang share: an interpreter, a model-spec prefix, trial flags, the argument check.

A real engine is `<python> -m <module> <model flags> <trial flags>` (or a user's command prefix
instead of `<python> -m <module>`). The model spec's flags come first; a trial may override the
ones a search space can sensibly tune (max_model_len, dtype, tensor parallel size, load format),
never the ones servetune owns (model, host, port, served name).
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
from tuner.engines import failures
from tuner.engines.base import Engine, LaunchSpec, user_dir
from tuner.engines.process import http_get
from tuner.spec.study import EngineSettings, ModelSpec
from tuner.trial.outcome import TrialOutcome

log = logging.getLogger(__name__)


class ServerEngine(Engine):
    """Base of the real engines; subclasses say their module, model flags and messages."""

    module: ClassVar[str]
    check_key: ClassVar[str]  # engine name the argument check script knows
    reserved: ClassVar[frozenset[str]]  # trial args servetune sets itself
    patterns: ClassVar[tuple[failures.Pattern, ...]] = failures.COMMON
    switches: ClassVar[frozenset[str]] = frozenset()  # known store_true flags (no --no- form)
    negatable_by_default: ClassVar[bool] = False

    def __init__(self) -> None:
        self._kinds: dict[str, str] = {}  # learned from the engine's own parser: negatable/switch/value

    # -- what subclasses provide -----------------------------------------------------------
    def model_flags(self, model: ModelSpec, launch: LaunchSpec, args: Mapping[str, Any]) -> list[str]:
        raise NotImplementedError

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

    def trial_flags(self, args: Mapping[str, Any]) -> list[str]:
        self._check_names(args)
        return cli.cli_flags(args, self.negatable)

    def argv(self, args: Mapping[str, Any], launch: LaunchSpec) -> list[str]:
        return self.prefix(launch) + self.model_flags(launch.model, launch, args) + self.trial_flags(args)

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
        base = self.model_flags(launch.model, launch, args) if launch is not None else []
        env = self.env(launch) if launch is not None else None
        answer = cli.checker(python, self.check_key, env).check(args, base)
        if answer.get("importable") is False:
            log.info("%s arguments not checked (%s is not usable from %s): %s", self.name, self.name, python,
                     answer.get("error"))
            return
        self._kinds.update(answer.get("kinds") or {})
        if not answer.get("ok"):
            key = answer.get("key")
            where = f"args.{key}" if key else f"{self.name} arguments"
            shown = json.dumps(dict(args), default=str)
            raise SpecError(f"{answer.get('error')} (args {shown})", where,
                            f"use an argument name and value {self.name} accepts (see `{self.module} --help`)")

    # -- failures and read-back --------------------------------------------------------------
    def classify(self, returncode: int | None, log_tail: str) -> tuple[TrialOutcome, str]:
        return failures.classify(returncode, log_tail, self.patterns)

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


def spec_value(args: Mapping[str, Any], names: tuple[str, ...], default: Any) -> tuple[Any, bool]:
    """A model-spec value unless the trial sets it under one of its names: (value, from_trial)."""
    for n in names:
        if args.get(n) is not None:
            return args[n], True
    return default, False
