"""The simulated engine: a calibrated discrete-event model of vLLM- and SGLang-style serving.

Two faces: `SimulatedEngine.run` (virtual time, fast) and `python -m tuner.sim.server` (a real
OpenAI-compatible streaming server running the same scheduler in real time). See docs/sim.md.
"""

from __future__ import annotations

from tuner.sim import native

native.install()  # compiled hot modules when a current build exists (tuner/sim/native.py), else pure Python

from tuner.sim.catalog import known_gpus, known_shapes, shape_for  # noqa: E402  (after install())
from tuner.sim.engine import SimulatedEngine  # noqa: E402
from tuner.sim.knobs import default_args  # noqa: E402

__all__ = ["SimulatedEngine", "default_args", "known_gpus", "known_shapes", "shape_for"]
