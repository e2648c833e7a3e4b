"""Where the real engine environments are (scripts/setup-vllm-cpu makes them), and a stand-in server.

`find_vllm_cpu_env()` is plain so other test folders can reuse it:
    from tests.engines.conftest import find_vllm_cpu_env   # or the `vllm_cpu_env` fixture here
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("standin_server.py")
SETUP_HINT = "run `bash scripts/setup-vllm-cpu` (CI does it through `make test`)"


def find_vllm_cpu_env() -> tuple[Path, Path] | str:
    """(python, model_dir) of the vLLM CPU env, or why it is not usable (a skip reason)."""
    venv = Path(os.environ.get("VLLM_CPU_VENV") or ROOT / ".venv-vllm-cpu")
    model = Path(os.environ.get("TINY_MODEL_DIR") or ROOT / ".cache" / "tiny-qwen3")
    python = venv / "bin" / "python"  # never .resolve(): a venv is known by its own path
    if not python.exists():
        return f"no vLLM CPU venv at {venv}: {SETUP_HINT}"
    if not list(venv.glob(".servetune-vllm-cpu-*")):
        return f"vLLM CPU venv at {venv} is incomplete (no setup marker): {SETUP_HINT}"
    if not (model / "config.json").exists() or not (model / "model.safetensors").exists():
        return f"no tiny model at {model}: {SETUP_HINT}"
    return python.absolute(), model.absolute()


def find_sglang_args_python() -> Path | str:
    """Interpreter that can import SGLang's ServerArgs (no GPU needed), or why not."""
    venv = Path(os.environ.get("SGLANG_ARGS_VENV") or ROOT / ".venv-sglang-args")
    python = venv / "bin" / "python"
    if not python.exists() or not list(venv.glob(".servetune-sglang-args-*")):
        return f"no SGLang parser venv at {venv}: {SETUP_HINT}"
    return python.absolute()


@pytest.fixture(scope="session")
def vllm_cpu_env() -> tuple[Path, Path]:
    found = find_vllm_cpu_env()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def sglang_args_python() -> Path:
    found = find_sglang_args_python()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture
def standin() -> list[str]:
    """Command prefix of the stand-in engine server (tests/engines/standin_server.py)."""
    return [sys.executable, str(STANDIN)]
