"""Engines registered by name; imported lazily so `import tuner` pulls in no engine."""

from __future__ import annotations

import importlib

from tuner.common.errors import SpecError
from tuner.engines.base import Engine

_REGISTRY: dict[str, str] = {
    "vllm": "tuner.engines.vllm:VLLMEngine",
    "sglang": "tuner.engines.sglang:SGLangEngine",
    "sim": "tuner.engines.sim:SimEngine",
}


def names() -> list[str]:
    return sorted(_REGISTRY)


def get_engine(name: str) -> Engine:
    if name not in _REGISTRY:
        raise SpecError(f"unknown engine {name!r}", "engine", f"use one of {names()}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()
