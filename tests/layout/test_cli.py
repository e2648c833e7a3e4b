"""`servetune` with run, bench, promote and sim subcommands; the `python -m tuner.*` forms stay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def _run(*code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *code], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)


def test_console_script_is_declared() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"servetune": "tuner.cli:main"}


def test_help_lists_the_subcommands_and_imports_nothing_heavy() -> None:
    proc = _run("-c", "import sys; from tuner.cli import main; rc = main(['--help']); "
                      "heavy = sorted(m for m in ('ray', 'optuna', 'mlflow', 'pydantic', 'pyarrow') if m in sys.modules); "
                      "print('HEAVY', heavy); raise SystemExit(rc)")
    assert proc.returncode == 0, proc.stderr
    for name in ("run", "bench", "promote", "sim"):
        assert f"\n  {name} " in proc.stdout, proc.stdout
    assert "HEAVY []" in proc.stdout


def test_subcommands_are_the_python_m_forms() -> None:
    via_cli = _run("-m", "tuner.cli", "run", "--help")
    via_m = _run("-m", "tuner.run", "--help")
    assert via_cli.returncode == via_m.returncode == 0
    # the same description and options; only the usage lines name the command as it was invoked
    assert via_cli.stdout.split("\n\n", 1)[1] == via_m.stdout.split("\n\n", 1)[1]
    assert via_cli.stdout.startswith("usage: servetune run ") and "--study" in via_cli.stdout
    assert "--url" in _run("-m", "tuner.cli", "bench", "--help").stdout
    assert "--study-run" in _run("-m", "tuner.cli", "promote", "--help").stdout
    assert "--flavour" in _run("-m", "tuner.cli", "sim", "--help").stdout


def test_unknown_command_is_bad_input() -> None:
    proc = _run("-m", "tuner.cli", "tune")
    assert proc.returncode == 2 and "unknown command 'tune'" in proc.stderr


def test_a_reader_that_leaves_early_ends_the_run_quietly(tmp_path: Path) -> None:
    """`python -m tuner.run --dry-run | head -1`: the closed pipe was a BrokenPipeError traceback and 'study
    failed' (exit 1); now nothing on stderr and the shell's 141, as for any command whose reader left."""
    proc = subprocess.Popen([sys.executable, "-m", "tuner.run", "--dry-run", "--output", str(tmp_path / "out")],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "error" not in err, err
