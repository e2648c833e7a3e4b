"""Engines: one module per engine (vllm, sglang, sim) owning everything servetune knows about it.

Registered by name in tuner.engines.registry and imported lazily, so `import tuner` pulls in no engine.
"""

from __future__ import annotations

from tuner.engines.registry import engine_class, get_engine, names

__all__ = ["engine_class", "get_engine", "names"]
