"""The simulated engine as a Ray Serve app: each replica owns one `tuner.sim.server` process.

The replica runs exactly the server a trial measured (same argv from tuner.engines' SimEngine, same
fault switches) behind a streaming proxy; see `serve_apps.engine_process` for why a child process.

    serve run promoted.yaml        # import_path: serve_apps.sim:build_app
"""

from __future__ import annotations

from typing import Any

from ray.serve.deployment import Application

from serve_apps.args import parse_args
from serve_apps.engine_process import build, describe

__all__ = ["build_app", "describe"]


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.sim:build_app``) for a promoted sim config."""
    parsed = parse_args(args)
    if parsed.engine != "sim":
        raise ValueError(f"serve_apps.sim builds engine 'sim' apps, got {parsed.engine!r}")
    return build(parsed)
