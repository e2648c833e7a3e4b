"""From a study to `tuner.promote`: the same default store as tuner.run, the model version and alias
it moved, and a token-protected Ray dashboard answered with how to pass the token."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
from mlflow import MlflowClient
from promote_factory import finished_study_run, make_trial

from tuner.promote.__main__ import main
from tuner.promote.registry import STAGING


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


def test_promote_finds_the_store_tuner_run_used(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tuner.run's default store is runs/<study>/mlflow.db; promote with only --study-run finds it there."""
    out = in_tmp / "runs" / "promo"
    out.mkdir(parents=True)
    uri = f"sqlite:///{out / 'mlflow.db'}"
    parent, _ = finished_study_run(uri, in_tmp, "promo", [make_trial(0, 3000, 300), make_trial(1, 2000, 200)])
    (out / "state.json").write_text(json.dumps({"parent_run_id": parent, "tracking_uri": uri, "study_name": "promo"}))
    code = main(["--study-run", parent, "--output", str(in_tmp / "promoted")])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    mv = MlflowClient(tracking_uri=uri, registry_uri=uri).get_model_version_by_alias("promo-config", STAGING)
    assert f"registered promo-config version {mv.version}, alias {STAGING} -> version {mv.version}" in printed.out


def test_promote_without_any_store_says_where_to_look(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--study-run", "0123456789abcdef"]) == 2
    err = capsys.readouterr().err
    assert "MLFLOW_TRACKING_URI" in err and "runs/" in err


class _TokenWall(http.server.BaseHTTPRequestHandler):
    """A dashboard with token auth on: every request without the token is refused with 401."""

    def do_GET(self) -> None:
        body = b'{"error": "Unauthenticated: missing or invalid authentication token"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_token_protected_dashboard_says_set_ray_auth_mode(in_tmp: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tuner.promote.__main__ import _admin, parser

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TokenWall)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        args = parser().parse_args(["--rollback", "x-config", "--address", f"http://127.0.0.1:{server.server_port}"])
        from tuner.common.errors import SpecError

        with pytest.raises(SpecError) as exc:
            _admin(args)
    finally:
        server.shutdown()
    text = str(exc.value)
    assert "RAY_AUTH_MODE=token" in text and "~/.ray/auth_token" in text
    assert "start Ray" not in text


def test_a_study_whose_baseline_is_best_promotes_the_defaults_and_says_so(tmp_path: Path) -> None:
    from promote_factory import make_study, rerun

    from tuner.promote import promote_study

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study = make_study("basebest")
    base = make_trial(0, 1000, 300, baseline=True)
    tuned = make_trial(1, 1100, 250, max_num_seqs=256)  # looked better once; 0.87x when confirmed
    result = promote_study(study, [base, tuned], output_dir=tmp_path / "out", tracking_uri=uri, parent_run_id=None,
                           confirm=lambda t, s: rerun(t, s, 870 if t.number == 1 else 995))
    assert result.promoted and result.defaults_won and result.trial is not None and result.trial.baseline
    assert "the engine defaults win" in result.reason and result.gain == pytest.approx(1.0)
    doc = json.loads((tmp_path / "out" / "promotion.json").read_text())
    assert doc["defaults_won"] and doc["trial_id"] == "t000" and doc["baseline_worst_objective"] == 995
    mv = MlflowClient(tracking_uri=uri, registry_uri=uri).get_model_version_by_alias("basebest-config", STAGING)
    assert json.loads(mv.tags["servetune.args"]) == base.args
