"""Secrets (HF tokens, API keys, passwords in URIs) never reach MLflow or stdout, checked in a real
SQLite MLflow store: every byte of the database and of every artifact is searched for them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tuner.common.errors import EngineStartError
from tuner.engines.process import ServerProcess
from tuner.tracking.mlflow_log import StudyTracker, default_uri
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

HF = "hf_SeCrEtTokEn0123456789"
PW = "pw-Sup3rSecret"
KEY = "sk-live0123456789abcdef"
SECRETS = (HF, PW, KEY)


def leaks(root: Path) -> list[str]:
    """Files under root (the store and its artifacts) that contain a secret."""
    return [f"{p.relative_to(root)}: {s}" for p in root.rglob("*") if p.is_file()
            for s in SECRETS if s.encode() in p.read_bytes()]


def tracker(out: Path, empty_store: Path) -> StudyTracker:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(empty_store, out / "mlflow.db")
    t = StudyTracker(default_uri(out), "secrets", "secrets", out / "mlartifacts")
    t.start()
    return t


def engine_log_with_a_key(tmp: Path) -> Path:
    """A real failed start whose argv held an API key (the way `--api-key` reaches a server)."""
    log = tmp / "trial" / "engine.log"
    srv = ServerProcess([sys.executable, "-c", "import sys; print('starting'); sys.exit(3)", "--api-key", KEY],
                        env={"HF_TOKEN": HF}, log_path=log, host="127.0.0.1", port=9, ready_timeout_s=30)
    with pytest.raises(EngineStartError):
        with srv:
            pass
    return log


def test_trial_runs_carry_no_secret(tmp_path: Path, empty_store: Path) -> None:
    out = tmp_path / "out"
    t = tracker(out, empty_store)
    result = TrialResult(
        trial_id="t1", number=1, engine="vllm", params={"max_num_seqs": 64},
        args={"max_num_seqs": 64, "api_key": KEY, "hf_token": HF},
        outcome=TrialOutcome.START_FAILED, reason=f"could not reach https://alice:{PW}@hub.example.com ({HF})",
        resolved={"vllm_env": {"HF_TOKEN": HF}, "api_key": KEY}, notes=[f"token {HF}"],
    )
    t.log_trial(result, ["max_num_seqs", "api_key"], {})
    t.finish(True)
    assert leaks(out) == []


def test_engine_log_artifact_carries_no_secret(tmp_path: Path, empty_store: Path) -> None:
    log = engine_log_with_a_key(tmp_path)
    assert HF not in log.read_text(), "the engine's env values are never written to its log"
    out = tmp_path / "out"
    t = tracker(out, empty_store)
    t.log_trial(TrialResult(trial_id="t2", number=2, engine="vllm", params={}, args={},
                            outcome=TrialOutcome.START_FAILED, reason="exit 3", log_path=str(log)), [], {})
    assert leaks(out) == []


def test_study_file_artifact_carries_no_secret(tmp_path: Path, empty_store: Path) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"name": "secrets", "engines": {"vllm": {"env": {"HF_TOKEN": HF}}},
                                     "tracking": {"mlflow_uri": f"https://alice:{PW}@mlflow.example.com"}}))
    out = tmp_path / "out"
    t = tracker(out, empty_store)
    t.log_study(study, ["vllm.max_num_seqs: int [16, 1024]"], {"engine": "vllm", "hf_token": HF})
    assert leaks(out) == []


def test_summary_on_stdout_masks_the_tracking_password(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tuner.run.summary import print_summary
    from tuner.spec.study import Study

    study = Study.model_validate({"name": "s", "engine": "sim", "model": {"name": "Qwen/Qwen3-8B"},
                                  "workload": {"profile": "dynamic"}, "sla": ["p99_ttft_ms <= 500"]})
    print_summary(study, [], tmp_path, f"https://alice:{PW}@mlflow.example.com", None, [], 1.0)
    assert PW not in capsys.readouterr().out


def test_a_tracking_uri_with_credentials_is_usable() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tuner.tracking.mlflow_log import check_uri

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check_uri(f"http://alice:{PW}@127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
