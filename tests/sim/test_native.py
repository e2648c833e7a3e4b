"""The optional compiled simulator (tuner/sim/native.py): same records as pure Python, never a stale build.

Each side runs in its own process (the choice is made once, at import of tuner.sim). The compiled tests
need a build (`scripts/build-sim-ext`, run by `make setup`); without one they skip, and in CI (where
`make test` builds it) on a machine with a C compiler and Python's headers a skip fails the run: a change
mypyc cannot compile must not pass unnoticed there.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from tuner.sim import native

ROOT = Path(__file__).resolve().parents[2]
BUILT = not isinstance(native._ext_files(), str)
TOOLCHAIN = bool(shutil.which(os.environ.get("CC", "cc"))) and (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file()
_skip = pytest.mark.skipif(not BUILT, reason=f"no current compiled build: {native._ext_files()}")


def needs_build(test: Callable[..., None]) -> Callable[..., None]:
    """Skip without a current build; with a toolchain, that skip fails in CI (tests/ci_guard.py)."""
    test = _skip(test)
    return pytest.mark.ci_required(test) if TOOLCHAIN else test


def _py(code_or_file: list[str], *, pure: bool, root: Path = ROOT) -> str:
    env = {k: v for k, v in os.environ.items() if k != native.ENV_PURE}
    env["PYTHONPATH"] = str(root)
    if pure:
        env[native.ENV_PURE] = "1"
    r = subprocess.run([sys.executable, *code_or_file], cwd=root, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@needs_build
def test_compiled_build_gives_the_golden_digests() -> None:
    out = _py(["-c", "import runpy, tuner.sim.native as n; print(n.status); "
               "runpy.run_path('tests/sim/golden.py', run_name='__main__')"], pure=False)
    assert out.splitlines() == ["compiled (mypyc)", "identical"]


@needs_build
def test_compiled_records_identical_to_pure() -> None:
    """80 cases (tests/sim/native_digests.py), among them every point of benchmarks/sim_speed.py."""
    comp = json.loads(_py(["tests/sim/native_digests.py"], pure=False))
    pure = json.loads(_py(["tests/sim/native_digests.py"], pure=True))
    assert comp["compiled"] and comp["status"] == "compiled (mypyc)"
    assert not pure["compiled"] and pure["status"].startswith("pure")
    assert len(comp["digests"]) >= 80
    assert [k for k in comp["digests"] if comp["digests"][k] != pure["digests"].get(k)] == []


PROBE = "import tuner.sim.native as n, tuner.sim.core as c, tuner.sim.engine as e; print(n.status); print(c.__file__)"


@needs_build
def test_an_edited_source_is_never_shadowed_by_the_build(tmp_path: Path) -> None:
    """A copy of the package with its build: used as is; after one source edit, pure Python is."""
    shutil.copytree(ROOT / "tuner", tmp_path / "tuner", ignore=shutil.ignore_patterns("__pycache__"))
    status, core = _py(["-c", PROBE], pure=False, root=tmp_path).splitlines()
    assert status == "compiled (mypyc)" and core.endswith(".so") and core.startswith(str(tmp_path))
    src = tmp_path / "tuner" / "sim" / "vllm_sched.py"
    src.write_text(src.read_text() + "\n# an edit\n")
    status, core = _py(["-c", PROBE], pure=False, root=tmp_path).splitlines()
    assert "stale" in status and core == str(tmp_path / "tuner" / "sim" / "core.py")


def test_pure_python_without_a_build(tmp_path: Path) -> None:
    """No _ext/ (no compiler, failed build) or SERVETUNE_SIM_PURE=1: the .py modules, and they work."""
    shutil.copytree(ROOT / "tuner", tmp_path / "tuner", ignore=shutil.ignore_patterns("__pycache__", "_ext"))
    status, core = _py(["-c", PROBE], pure=False, root=tmp_path).splitlines()
    assert status.startswith("pure: no build") and core.endswith("core.py")
    status, core = _py(["-c", PROBE], pure=True).splitlines()
    assert status == f"pure: {native.ENV_PURE} set" and core.endswith("core.py")


def test_engine_pickles_compiled_or_not() -> None:
    """A compiled class has no __dict__ for pickle to copy: SimulatedEngine pickles as its arguments."""
    from tests.sim.simhelp import engine, poisson
    from tuner.sim.calibration import FITTED

    eng = engine(max_num_seqs=64)
    eng.macro_steps = False
    back = pickle.loads(pickle.dumps(eng))
    assert back.resolved == eng.resolved and back.macro_steps is False and back.cal == FITTED
    reqs = poisson(40, 8.0, inp=(200, 3000), out=(20, 300))
    assert [r.token_times.tolist() for r in back.run(reqs)] == [r.token_times.tolist() for r in eng.run(reqs)]
    assert pickle.loads(pickle.dumps(FITTED)) == FITTED


@needs_build
def test_a_build_that_does_not_load_falls_back(tmp_path: Path) -> None:
    """Current stamp, broken extension file: pure Python, and the simulator still runs."""
    shutil.copytree(ROOT / "tuner", tmp_path / "tuner", ignore=shutil.ignore_patterns("__pycache__"))
    stamp = json.loads((tmp_path / "tuner" / "sim" / "_ext" / "stamp.json").read_text())
    (tmp_path / "tuner" / "sim" / "_ext" / stamp["files"]["vllm_sched"]).write_bytes(b"not an ELF file")
    probe = PROBE + ("; from tuner.load.records import Request; s = e.SimulatedEngine(flavour='vllm', gpu='H200', "
                     "shape='qwen3-8b', args={}, max_model_len=4096); print(s.run([Request(0, 0.0, 100, 10)])[0].ok)")
    status, core, ok = _py(["-c", probe], pure=False, root=tmp_path).splitlines()
    assert status.startswith("pure: compiled modules failed to load") and core.endswith("core.py") and ok == "True"
