"""In CI (CI=true) a skipped test that needs a real component CI must provide (the vLLM CPU env,
headless Chromium, `transformers`...) fails the run instead of passing quietly as a skip.

Markers: `vllm_cpu`, `browser`, `ci_required`. Loaded by tests/conftest.py; `make test` also prints
every skip with its reason (`pytest -rs`).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

CI_REQUIRED = ("vllm_cpu", "browser", "ci_required")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or not in_ci() or hasattr(rep, "wasxfail"):
        return
    marks = [m for m in CI_REQUIRED if item.get_closest_marker(m)]
    if marks:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = (f"skipped in CI, but this test needs a real component CI must provide "
                        f"(marker {', '.join(marks)}): {reason}")
