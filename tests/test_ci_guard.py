"""CI never passes quietly over a real component it failed to provide: such a skip fails when CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SAMPLE = '''
import pytest

@pytest.mark.vllm_cpu
def test_needs_vllm():
    pytest.skip("no vLLM CPU venv")

@pytest.mark.browser
@pytest.mark.skipif(True, reason="headless chromium not installed")
def test_needs_chromium():
    pass

def test_may_skip():
    pytest.skip("this test covers machines without a GPU")
'''


def _pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "tests.ci_guard", "-p", "no:cacheprovider",
                           "test_sample.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_real_component_skips_fail_in_ci(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "true")
    assert proc.returncode == 1, proc.stdout
    assert "1 failed, 1 skipped" in proc.stdout and "1 error" in proc.stdout, proc.stdout  # skipif: at setup
    assert "skipped in CI" in proc.stdout and "no vLLM CPU venv" in proc.stdout
    assert "SKIPPED" in proc.stdout and "machines without a GPU" in proc.stdout  # unmarked skips are allowed


def test_outside_ci_they_are_listed_skips(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, None)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.count("SKIPPED") == 3


def test_make_test_prints_skips() -> None:
    make = (ROOT / "Makefile").read_text()
    assert "pytest -q -rs" in make
