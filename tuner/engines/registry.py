"""Which engines exist: name -> the one module (and class) that is that engine's home.

Stdlib only, so the study schema can ask for the known names without importing any engine.
Built-ins are vllm, sglang and sim; more can be added without touching servetune through
SERVETUNE_ENGINES ("name=package.module:Class,..."), which Ray workers inherit from the driver.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from tuner.common.errors import SpecError

if TYPE_CHECKING:
    from tuner.engines.base import Engine

BUILTIN: dict[str, str] = {
    "vllm": "tuner.engines.vllm:VLLMEngine",
    "sglang": "tuner.engines.sglang:SGLangEngine",
    "sim": "tuner.engines.sim:SimEngine",
}
ENV = "SERVETUNE_ENGINES"


def table() -> dict[str, str]:
    """Built-ins plus the engines SERVETUNE_ENGINES adds (read each time: a test may set it)."""
    out = dict(BUILTIN)
    for item in os.environ.get(ENV, "").split(","):
        name, sep, target = item.strip().partition("=")
        if not item.strip():
            continue
        if not sep or ":" not in target or not name.isidentifier():
            raise SpecError(f"bad {ENV} entry {item!r}", ENV, "write name=package.module:Class, comma separated")
        out[name] = target.strip()
    return out


def names() -> list[str]:
    return sorted(table())


def engine_class(name: str) -> type[Engine]:
    """The class of a registered engine (imported on first use)."""
    known = table()
    if name not in known:
        raise SpecError(f"unknown engine {name!r}", "engine", f"use one of {sorted(known)}")
    module, cls = known[name].split(":")
    found: type[Engine] = getattr(importlib.import_module(module), cls)
    return found


def get_engine(name: str) -> Engine:
    return engine_class(name)()
