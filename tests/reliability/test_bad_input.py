"""The bad-input corpus (bad_input_cases.py): each case exits with status 2, prints its exact message,
and starts nothing: no Ray, no engine, no MLflow store, no file in the output folder.

Most cases run `tuner.run.main` in this process (the same code path as the CLI, ~10 ms each); a few run
the real `python -m tuner.run` subprocess, including the one that needs a Ray cluster to be refused.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from bad_input_cases import CASES, ROOT, WILD, Case, prepare, render
from relhelp import RAY_ENV

from tests.conftest import run_cli
from tuner.run.cli import main

# Checked again as real subprocesses: a file error, a schema error, a preflight error, and the Ray one.
SUBPROCESS = {"malformed-yaml", "sla-p101", "output-unwritable", "alias-bomb", "binary-study", "resume-other-study",
              "vllm-not-installed", "mlflow-uri-port-range",
              # audit 2: a hang, a silent fresh start, a traceback and a loss of unlogged trials, end to end
              "study-named-pipe", "resume-nothing-there", "fixed-list", "fresh-run-over-unlogged-trials"}


def expected_line(case: Case, tmp: Path, study: Path) -> re.Pattern[str]:
    text = case.message.replace("{study}", str(study)).replace("{tmp}", str(tmp)).replace("{root}", str(ROOT))\
        .replace("{python}", sys.executable)
    body = ".+?".join(re.escape(part) for part in text.split(WILD))
    return re.compile(rf"(python -m tuner\.run: )?error: {body}")


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file under the output folder with its bytes (cases for --resume start with some there)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} if out.is_dir() else {}


def check_nothing_started(out: Path, before: dict[str, bytes]) -> None:
    after = snapshot(out)
    assert after == before, f"bad input changed the output folder: {sorted(set(after) ^ set(before)) or 'contents'}"


def _params(cases: list[Case]) -> list:
    def marks(c: Case) -> list:
        return ([pytest.mark.xfail(strict=True, reason=c.bug)] if c.bug else []) + (
            [pytest.mark.slow] if c.needs_ray else [])  # starting Ray takes a while
    return [pytest.param(c, id=c.id, marks=marks(c)) for c in cases]


@pytest.mark.parametrize("case", _params([c for c in CASES if not c.needs_ray]))
def test_bad_input_in_process(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import ray

    args, study, out = prepare(case, tmp_path)
    before = snapshot(out)
    try:
        rc = main(args)
    except SystemExit as exc:  # argparse's own refusal (a non-number for --trials)
        rc = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert expected_line(case, tmp_path, study).fullmatch(err[-1]), f"\n got: {err[-1]}\nwant: {case.message}"
    assert "s3cret" not in "\n".join(err), "a password from the input reached stderr"
    assert not ray.is_initialized(), "Ray was started for bad input"
    assert len(err[-1]) < 5000, "an error message must stay short"
    check_nothing_started(out, before)


@pytest.mark.parametrize("case", _params([c for c in CASES if c.needs_ray or c.id in SUBPROCESS]))
def test_bad_input_cli(case: Case, tmp_path: Path) -> None:
    args, study, out = prepare(case, tmp_path)
    before = snapshot(out)
    proc = run_cli(*args, timeout=400, env=RAY_ENV if case.needs_ray else None)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert expected_line(case, tmp_path, study).fullmatch(err[-1]), f"\n got: {err[-1]}\nwant: {case.message}"
    assert "Traceback" not in proc.stderr
    check_nothing_started(out, before)  # no engine.log, no trials/, no tune/, no mlflow.db, no state.json


def test_corpus_is_large_and_ids_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 130


def test_docs_list_every_case_with_its_message() -> None:
    doc = (ROOT / "docs" / "bad-input.md").read_text()
    assert doc == render(), "docs/bad-input.md is stale: python tests/reliability/bad_input_cases.py > docs/bad-input.md"


def test_yaml_merge_keys_and_anchors_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Valid YAML merge keys (`<<: *base`) are not bad input: the merged study passes a dry run, and a key
    written beside the merge overrides the merged one."""
    import yaml
    from bad_input_cases import base_study

    data = base_study()
    capacity = data.pop("capacity")
    study = tmp_path / "merge.yaml"
    text = yaml.safe_dump(data, sort_keys=False) + "capacity:\n  <<: &cap " + yaml.safe_dump(
        capacity, default_flow_style=True).strip() + "\n  max_points: 2\n"
    study.write_text(text)
    rc = main(["--study", str(study), "--output", str(tmp_path / "out"), "--dry-run"])
    assert rc == 0, capsys.readouterr().err
    from tuner.spec.load import load_yaml

    loaded = load_yaml(study)
    assert loaded["capacity"] == {**capacity, "max_points": 2}


LOG_ONLY_FIX = "give the output folder of a study run with --tracking deferred"


@pytest.mark.parametrize(("state", "message"), [
    ("[1, 2]", "{out}/state.json is not a JSON object (got list; not a servetune state file?)"),
    ('{"tracking_uri": 5}', "{out}/state.json has a tracking_uri that is not text (5) | fix: give the tracking URI with --mlflow-uri"),
    ("[" * 100_000 + "]" * 100_000, "{out}/state.json is not valid JSON (truncated or corrupt: nested too deeply)"),
    (None, "{out} holds no readable state.json"),  # a named pipe: opening it waited for a writer forever
], ids=["list", "uri-not-text", "nested-deep", "named-pipe"])
def test_log_only_odd_state_files(state: str | None, message: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--log-only OUTPUT` (no study file: the bad-input corpus always passes one) over a state.json it cannot
    use: exit 2 with one message, never an AttributeError, a RecursionError or a hang."""
    import os

    out = tmp_path / "out"
    out.mkdir()
    if state is None:
        os.mkfifo(out / "state.json")
    else:
        (out / "state.json").write_text(state)
    assert main(["--log-only", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    want = message.format(out=out)
    assert err == f"error: --log-only: {want}" + ("" if " | fix: " in want else f" | fix: {LOG_ONLY_FIX}"), err
