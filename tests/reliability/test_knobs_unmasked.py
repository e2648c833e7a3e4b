"""Redaction masks secrets by what they are, never a knob whose name mentions tokens.

Every search-space knob of vLLM and SGLang (`max_num_batched_tokens`, `max_prefill_tokens`,
`max_total_tokens`, ...) reaches MLflow's params, trial.json and resolved_config.json with its value,
while planted secrets (a secret key, a URI password, the value of a secret env var) appear nowhere in
the store, stdout or the report of a real study run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_cli, small_study
from tuner.common.redact import MASK, redact, redact_text
from tuner.spec.load import load_space_file
from tuner.tracking.mlflow_log import StudyTracker, default_uri
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

ENV_SECRET = "planted-Env-Value-7f3a9c"  # no known token format: only the env var's name says it is secret
PW = "pw-Sup3rSecret"
KEY = "sk-live0123456789abcdef"


def _knobs(engine: str) -> dict[str, object]:
    space = load_space_file(ROOT / "search_spaces" / f"{engine}.yaml")
    out: dict[str, object] = {}
    for name, p in space.params.items():
        if p.default is not None:
            out[name] = p.default
        elif p.choices:
            out[name] = p.choices[0]
        else:
            out[name] = p.low
    return out


def test_names_that_mention_tokens_are_not_secrets(monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_SECRET)
    data = {"max_num_batched_tokens": 8192, "max_prefill_tokens": 16384, "max_total_tokens": 400000,
            "output_tokens_per_s": 1423.4, "tokenizer": "Qwen/Qwen3-8B", "RAY_AUTH_MODE": "token",
            "hf_token": "abc12345", "api_key": KEY, "HUGGING_FACE_HUB_TOKEN": "x" * 10,
            "argv": ["--api-key", KEY, "--max-num-batched-tokens", "8192", "--hf-token=abcdefgh"],
            "note": f"saw {ENV_SECRET} and https://bob:{PW}@h/x with Authorization: Bearer abcdefghijk"}
    out = redact(data)
    for k in ("max_num_batched_tokens", "max_prefill_tokens", "max_total_tokens", "output_tokens_per_s",
              "tokenizer", "RAY_AUTH_MODE"):
        assert out[k] == data[k], k
    assert out["hf_token"] == out["api_key"] == out["HUGGING_FACE_HUB_TOKEN"] == MASK
    assert out["argv"] == ["--api-key", MASK, "--max-num-batched-tokens", "8192", f"--hf-token={MASK}"]
    for secret in (ENV_SECRET, PW, "abcdefghijk"):
        assert secret not in out["note"]
    assert redact_text("max_num_batched_tokens=8192") == "max_num_batched_tokens=8192"


def test_every_knob_of_both_engines_survives_into_mlflow(tmp_path: Path, empty_store: Path, monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_SECRET)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(empty_store, out / "mlflow.db")
    tracker = StudyTracker(default_uri(out), "knobs", "knobs", out / "mlartifacts")
    tracker.start()
    client = MlflowClient(tracking_uri=default_uri(out))
    for i, engine in enumerate(("vllm", "sglang")):
        knobs = _knobs(engine)
        t = TrialResult(trial_id=f"t{i}", number=i, engine=engine, params=dict(knobs), args=dict(knobs),
                        outcome=TrialOutcome.OK, objective=1.0, capacity=1.0,
                        metrics={"output_tokens_per_s": 1.0}, reason=f"env {ENV_SECRET}",
                        resolved={**knobs, "api_key": KEY, "uri": f"https://a:{PW}@h"})
        rid = tracker.log_trial(t, list(knobs), {})
        params = client.get_run(rid).data.params
        art = Path(client.download_artifacts(rid, "trial.json", str(tmp_path / f"a{i}")))
        trial_json = json.loads(art.read_text())
        res = Path(client.download_artifacts(rid, "resolved_config.json", str(tmp_path / f"r{i}")))
        resolved = json.loads(res.read_text())
        for name, value in knobs.items():
            assert params[name] == str(value), (engine, name, params[name])
            assert trial_json["args"][name] == value and trial_json["params"][name] == value, (engine, name)
            assert resolved[name] == value, (engine, name)
        assert resolved["api_key"] == MASK
    tracker.finish(True)
    blobs = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    for secret in (ENV_SECRET, PW, KEY):
        assert not any(secret.encode() in b for b in blobs), secret


def test_study_run_keeps_knobs_and_hides_planted_secrets(tmp_path: Path) -> None:
    study = small_study(tmp_path, name="planted", budget={"trials": 2, "max_concurrent": 1},
                        promotion={"enabled": False})
    data = yaml.safe_load(study.read_text())
    data["engines"] = {"vllm": {"env": {"HF_TOKEN": ENV_SECRET}}}
    study.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    proc = run_cli("--study", str(study), "--output", str(out),
                   env={"MY_SERVICE_PASSWORD": ENV_SECRET, "HF_TOKEN": ENV_SECRET})
    assert proc.returncode in (0, 3), proc.stdout[-2000:] + proc.stderr[-3000:]
    assert ENV_SECRET not in proc.stdout + proc.stderr
    assert (out / "report.html").exists()
    # The MLflow store and its artifacts, and the report (Ray's own state is the reliability issue's).
    files = [out / "mlflow.db", out / "report.html", *(out / "mlartifacts").rglob("*")]
    leaks = [str(p) for p in files if p.is_file() and ENV_SECRET.encode() in p.read_bytes()]
    assert leaks == [], leaks
    client = MlflowClient(tracking_uri=default_uri(out))
    exp = client.get_experiment_by_name("planted")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("servetune.kind") == "trial"]
    assert len(runs) == 2
    for r in runs:
        v = r.data.params["max_num_batched_tokens"]
        assert v != MASK and int(v) > 0, v
