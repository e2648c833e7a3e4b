"""A study submitted as a Ray job to a real local head, the way a user runs it on a GPU cluster.

The head is started with token authentication (Ray 2.60): a client without the token is refused,
`ray get-auth-token` on the head prints it, and a client with RAY_AUTH_MODE=token plus the token
(RAY_AUTH_TOKEN, or a file via RAY_AUTH_TOKEN_PATH / ~/.ray/auth_token) can submit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.cluster.ray_head import VENV_BIN, RayHead
from tests.conftest import ROOT, small_study

pytestmark = pytest.mark.slow
LOOSE_SLA = ["p99_ttft_ms <= 2000", "p99_e2el_ms <= 60000"]  # this test is about the cluster path, not tuning


def ray_cli(head: RayHead, *args: str, env: dict[str, str], timeout: float = 600,
            cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "ray"), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_token_auth_guards_the_job_api(head: RayHead) -> None:
    assert head.http_status("/api/jobs/", None) == 401
    assert head.http_status("/api/jobs/", "0" * 64) == 403
    assert head.http_status("/api/jobs/", head.token) == 200
    # On the head node, `ray get-auth-token` prints the token a client needs (to stdout, for piping).
    got = ray_cli(head, "get-auth-token", env=head.head_env, timeout=60)
    assert got.returncode == 0 and got.stdout.strip() == head.token
    refused = ray_cli(head, "job", "list", "--address", head.dashboard_url, env=head.client_env(with_token=False),
                      timeout=120)
    assert refused.returncode != 0 and "Authentication required" in refused.stdout + refused.stderr


def test_study_runs_as_a_ray_job(head: RayHead, tmp_path: Path) -> None:
    """The token-holding client submits; the accepted job is itself the proof that the token was sent."""
    study = small_study(tmp_path, name="jobstudy", sla=LOOSE_SLA, promotion={"confirm_runs": 0, "top_k": 1})
    out = tmp_path / "out"
    submitted = ray_cli(
        head, "job", "submit", "--address", head.dashboard_url, "--working-dir", ".",
        "--submission-id", "servetune-job-test", "--",
        "python", "-m", "tuner.run", "--study", str(study), "--trials", "3", "--output", str(out),
        env=head.client_env(), timeout=900)
    logs = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, logs[-6000:]
    assert "Job 'servetune-job-test' succeeded" in logs
    info = head.get_json("/api/jobs/servetune-job-test")
    assert info["status"] == "SUCCEEDED" and info["driver_exit_code"] == 0, info
    rows = pq.read_table(out / "trials.parquet").to_pylist()
    assert len(rows) == 3 and sorted(r["number"] for r in rows) == [0, 1, 2]
    pareto = json.loads((out / "pareto.json").read_text())
    assert pareto["front"]
    promoted = yaml.safe_load((out / "promoted.yaml").read_text())
    assert promoted["applications"]
    assert (out / "report.html").stat().st_size > 1_000_000
    # The driver ran inside the cluster's job supervisor, from the uploaded working dir.
    assert "runtime_resources/working_dir_files" in logs or "Running entrypoint for job" in logs
