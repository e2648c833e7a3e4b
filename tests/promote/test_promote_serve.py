"""Promotion into a real local Ray Serve (CPU only, the sim engine): deploy, smoke test, rollback.

One Ray head + Serve for the whole module (starting them is the slow part on 2 cores).
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from promote_factory import finished_study_run, make_study, make_trial
from serve_cluster import ServeCluster, serve_cluster

from tuner.promote import promote_study
from tuner.promote.deploy import deploy_blue_green
from tuner.promote.registry import PREVIOUS, STAGING
from tuner.promote.serve_config import app_args, app_config, failover_apps
from tuner.promote.smoke import smoke_test

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[ServeCluster]:
    with serve_cluster() as c:
        yield c


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def _finished_study(uri: str, tmp: Path, name: str, max_num_seqs: int, **changes) -> tuple[str, str]:
    """A finished study whose only SLA-feasible trial runs `max_num_seqs`."""
    trials = [make_trial(0, 3000, 300, max_num_seqs=max_num_seqs),
              make_trial(1, 9000, 900, max_num_seqs=1024)]  # violates the SLA: never promoted
    return finished_study_run(uri, tmp, name, trials, promotion={"confirm_runs": 0, "top_k": 1}, **changes)


def _promote_cli(cluster: ServeCluster, *args: str):
    return cluster.cli(sys.executable, "-m", "tuner.promote", *args)


CANARY = ("--canary-seconds", "3")  # a short canary: the sim at time_scale 50 answers in milliseconds


def _candidate_leaving(cluster: ServeCluster) -> None:
    """The side app a new config was tried on is gone or on its way out."""
    apps = cluster.admin().details()["applications"]
    assert apps.get("staging-candidate", {"status": "DELETING"})["status"] == "DELETING"


def _serving(cluster: ServeCluster) -> dict:
    """What the app serves (config and lineage); the engine process it runs in (pid, log) is left out:
    a rollback restarts the previous config in a new one."""
    about = json.loads(cluster.get("/servetune"))
    return {k: v for k, v in about.items() if k not in ("engine_pid", "engine_log")}


def test_promoted_yaml_deploys_with_serve_deploy_and_streams_chat(cluster: ServeCluster, tmp_path: Path,
                                                                   mlflow_uri: str) -> None:
    study = make_study("cli", promotion={"confirm_runs": 0, "top_k": 1, "app_name": "cli-app",
                                         "route_prefix": "/cli"})
    result = promote_study(study, [make_trial(0, 3000, 300, max_num_seqs=96)], output_dir=tmp_path,
                           tracking_uri=mlflow_uri, parent_run_id=None, confirm=None)
    proc = cluster.cli(str(Path(sys.executable).parent / "serve"), "deploy", str(result.serve_config),
                       "--address", cluster.dashboard)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    admin = cluster.admin()
    app = yaml.safe_load(result.serve_config.read_text())["applications"][0]
    admin.wait_running("cli-app", app, 300)
    smoke = smoke_test(cluster.http_base, "/cli", "qwen3-8b", max_tokens=6)
    assert smoke.chunks >= 1 and smoke.text.split() == ["tok"] * 6  # the sim may send several per event
    served = json.loads(cluster.get("/cli/servetune"))
    assert served["engine_args"]["max_num_seqs"] == 96
    info = json.loads(cluster.get("/cli/server_info"))  # the engine itself, through the proxy
    assert info["max_num_seqs"] == 96


@pytest.fixture(scope="module")
def staged(cluster: ServeCluster, mlflow_uri: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Staging serves version 1 of "life-config" (max_num_seqs 64), deployed with the CLI; its run ids."""
    tmp = tmp_path_factory.mktemp("staged")
    study_run, trial_run = _finished_study(mlflow_uri, tmp, "life", 64)
    proc = _promote_cli(cluster, "--study-run", study_run, "--mlflow-uri", mlflow_uri, "--deploy",
                        "--output", str(tmp / "p1"), *CANARY)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    mv = MlflowClient(tracking_uri=mlflow_uri).get_model_version_by_alias("life-config", STAGING)
    assert str(mv.version) == "1" and mv.tags["servetune.trial_run_id"] == trial_run  # found by its tag
    assert mv.tags["servetune.study_run_id"] == study_run
    assert _serving(cluster)["engine_args"]["max_num_seqs"] == 64
    # the canary ran against the deployed app at 0.8 x the confirmed capacity (8 req/s) and passed
    assert "canary: 6.4 req/s for 3s" in proc.stdout and "canary passed" in proc.stdout, proc.stdout
    assert "the app is the simulator at time_scale 50" in proc.stdout, proc.stdout
    assert mv.tags["servetune.canary"] == "passed" and float(mv.tags["servetune.canary_completed"]) >= 10
    record = json.loads((tmp / "p1" / "promotion.json").read_text())["canary"]
    assert record["passed"] and record["figures"]["error_rate"] == 0 and record["figures"]["p99_ttft_ms"] <= 500
    run = MlflowClient(tracking_uri=mlflow_uri).get_run(mv.run_id)
    assert run.data.metrics["canary_passed"] == 1.0 and run.data.metrics["canary_completed"] >= 10
    # nothing staging replaced yet: a rollback is refused in words, before Serve is touched
    proc = _promote_cli(cluster, "--rollback", "life-config", "--mlflow-uri", mlflow_uri)
    assert proc.returncode == 2 and "previous-staging" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    return "life-config"


def test_deploy_moves_alias_and_rollback_restores_the_previous_config(cluster: ServeCluster, tmp_path: Path,
                                                                       mlflow_uri: str, staged: str) -> None:
    client = MlflowClient(tracking_uri=mlflow_uri)
    before = _serving(cluster)
    old = str(client.get_model_version_by_alias(staged, STAGING).version)
    second, _ = _finished_study(mlflow_uri, tmp_path, "life", 128)
    proc = _promote_cli(cluster, "--study-run", second, "--mlflow-uri", mlflow_uri, "--deploy",
                        "--output", str(tmp_path / "p2"), *CANARY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    new = str(client.get_model_version_by_alias(staged, STAGING).version)
    assert new != old and str(client.get_model_version_by_alias(staged, PREVIOUS).version) == old
    now = _serving(cluster)
    assert now["engine_args"]["max_num_seqs"] == 128 and now["lineage"]["model_version"] == new
    _candidate_leaving(cluster)

    proc = _promote_cli(cluster, "--rollback", staged, "--mlflow-uri", mlflow_uri)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"rolled back from version {new} to {old}" in proc.stdout, proc.stdout
    assert str(client.get_model_version_by_alias(staged, STAGING).version) == old
    assert _serving(cluster) == before
    smoke_test(cluster.http_base, "/", "qwen3-8b")


def test_a_failed_smoke_test_leaves_staging_and_alias_unchanged(cluster: ServeCluster, tmp_path: Path,
                                                                  mlflow_uri: str, staged: str) -> None:
    client = MlflowClient(tracking_uri=mlflow_uri)
    before = _serving(cluster)
    alias_before = str(client.get_model_version_by_alias(staged, STAGING).version)
    broken, _ = _finished_study(mlflow_uri, tmp_path, "life", 256, sim={
        "flavour": "vllm", "gpu": "H200", "mode": "server", "time_scale": 50.0,
        "faults": {"http500_rate": 1.0}})  # starts and reports healthy, answers every request with 500
    proc = _promote_cli(cluster, "--study-run", broken, "--mlflow-uri", mlflow_uri, "--deploy",
                        "--output", str(tmp_path / "broken"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "unchanged" in proc.stdout and "500" in proc.stdout
    latest = max(int(v.version) for v in client.search_model_versions(f"name = '{staged}'"))
    assert str(latest) != alias_before  # registered, but never given the alias
    assert str(client.get_model_version_by_alias(staged, STAGING).version) == alias_before
    assert _serving(cluster) == before
    smoke_test(cluster.http_base, "/", "qwen3-8b")
    _candidate_leaving(cluster)


def test_a_canary_that_misses_the_sla_rolls_back_to_the_previous_app(cluster: ServeCluster, tmp_path: Path,
                                                                        mlflow_uri: str, staged: str) -> None:
    """The study's records say max_num_seqs=1 met the SLA at 8 req/s; the deployed app (the sim at 5x real
    time) cannot: it passes the smoke test, misses P99 TTFT under the canary and the old app comes back."""
    client = MlflowClient(tracking_uri=mlflow_uri)
    before = _serving(cluster)
    alias_before = str(client.get_model_version_by_alias(staged, STAGING).version)
    slow, _ = _finished_study(mlflow_uri, tmp_path, "life", 1, sim={
        "flavour": "vllm", "gpu": "H200", "mode": "server", "time_scale": 5.0})
    proc = _promote_cli(cluster, "--study-run", slow, "--mlflow-uri", mlflow_uri, "--deploy",
                        "--output", str(tmp_path / "slow"), "--canary-seconds", "10")
    print(proc.stdout)  # the verdict and figures, shown with pytest -rP
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "canary FAILED" in proc.stdout and "canary missed the SLA" in proc.stdout, proc.stdout
    assert "p99_ttft_ms" in proc.stdout and "rolled back" in proc.stdout, proc.stdout
    assert f"staging alias unchanged at version {alias_before}" in proc.stdout, proc.stdout
    assert str(client.get_model_version_by_alias(staged, STAGING).version) == alias_before
    assert _serving(cluster) == before  # the previous config serves again
    smoke_test(cluster.http_base, "/", "qwen3-8b")
    latest = str(max(int(v.version) for v in client.search_model_versions(f"name = '{staged}'")))
    mv = client.get_model_version(staged, latest)
    assert mv.tags["servetune.canary"] == "failed", proc.stdout
    assert "p99_ttft_ms" in mv.tags["servetune.canary_reason"], mv.tags
    record = json.loads((tmp_path / "slow" / "promotion.json").read_text())["canary"]
    assert not record["passed"] and record["violations"] and record["load"] == 6.4, record
    assert "p99_ttft_ms" in " ".join(record["violations"]), record


def test_failover_router_sends_traffic_to_the_secondary_when_the_primary_fails(cluster: ServeCluster) -> None:
    """Primary answers every request with HTTP 500 (sim fault); the router retries on the secondary."""
    bad = make_study("fo", sim={"flavour": "vllm", "gpu": "H200", "mode": "server", "time_scale": 50.0,
                                "faults": {"http500_rate": 1.0}})
    good = make_study("fo", sim={"flavour": "sglang", "gpu": "H200", "mode": "server", "time_scale": 50.0})
    primary = app_config(app_args(bad, make_trial(0, 3000, 300, max_num_seqs=16)), name="x", route_prefix="/x")
    sglang_trial = make_trial(1, 2500, 250)
    sglang_trial.args = {"max_running_requests": 24}
    secondary = app_config(app_args(good, sglang_trial), name="y", route_prefix="/y")
    apps = failover_apps(primary, secondary, name="ha", route_prefix="/ha", proxy_url=cluster.http_base)
    admin = cluster.admin()
    admin.apply({**admin.declared_apps(), **{a["name"]: a for a in apps}})
    try:
        for app in apps:
            admin.wait_running(app["name"], app, 300)
        for _ in range(3):
            smoke = smoke_test(cluster.http_base, "/ha", "qwen3-8b", max_tokens=4)
            assert smoke.text.split() == ["tok"] * 4
        req = urllib.request.Request(cluster.http_base + "/ha/server_info")
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.headers["x-servetune-backend"] == "secondary"
            assert json.loads(resp.read())["max_running_requests"] == 24  # the SGLang-flavour side
        state = json.loads(cluster.get("/ha/servetune/failover"))
        assert state["primary"]["failures"] >= 3 and not state["primary"]["healthy"]
        assert state["secondary"]["healthy"]
    finally:
        admin.apply({k: v for k, v in admin.declared_apps().items() if not k.startswith("ha")})


def test_failover_command_moves_traffic_when_the_primary_engine_is_killed(cluster: ServeCluster, tmp_path: Path,
                                                                          mlflow_uri: str) -> None:
    """`python -m tuner.promote.failover` on two promoted.yaml files (sim vLLM- and SGLang-flavour apps):
    the primary answers, its engine process is killed, the router sends the next requests to the secondary."""
    files = []
    for flavour, trial in (("vllm", make_trial(0, 3000, 300, max_num_seqs=16)), ("sglang", make_trial(1, 2500, 250))):
        if flavour == "sglang":
            trial.args = {"max_running_requests": 24}
        study = make_study(f"fo-{flavour}", sim={"flavour": flavour, "gpu": "H200", "mode": "server",
                                                 "time_scale": 50.0}, promotion={"confirm_runs": 0, "top_k": 1})
        result = promote_study(study, [trial], output_dir=tmp_path / flavour, tracking_uri=mlflow_uri,
                               parent_run_id=None, confirm=None, set_alias=False)
        files.append(str(result.serve_config))
    proc = cluster.cli(sys.executable, "-m", "tuner.promote.failover", "--primary", files[0], "--secondary", files[1],
                       "--name", "fo", "--route", "/fo", "--requests", "2", "--kill-primary", "--timeout", "300")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "before #1: answered by primary" in out and "before #2: answered by primary" in out, out
    assert "after kill #1: answered by secondary" in out and "after kill #2: answered by secondary" in out, out
    assert "ok: traffic moved to the secondary" in out, out
    assert not any(k.startswith("fo") for k in cluster.admin().declared_apps())  # removed at the end


def test_failover_on_one_shared_gpu_caps_each_engine_and_starts_the_secondary_after_the_primary(
        cluster: ServeCluster, tmp_path: Path, mlflow_uri: str) -> None:
    """--share-gpu on the sim pair: the deployed sides serve the capped memory knobs (vLLM-flavour
    gpu_memory_utilization 0.95 -> 0.42, SGLang-flavour mem_fraction_static unset -> 0.42) and say so,
    the secondary is deployed once the primary runs, and traffic still moves when the primary dies."""
    files = []
    for flavour, args in (("vllm", {"max_num_seqs": 16, "gpu_memory_utilization": 0.95}),
                          ("sglang", {"max_running_requests": 24})):
        trial = make_trial(0, 3000, 300)
        trial.args = args
        study = make_study(f"fs-{flavour}", sim={"flavour": flavour, "gpu": "H200", "mode": "server",
                                                 "time_scale": 50.0}, promotion={"confirm_runs": 0, "top_k": 1})
        result = promote_study(study, [trial], output_dir=tmp_path / flavour, tracking_uri=mlflow_uri,
                               parent_run_id=None, confirm=None, set_alias=False)
        files.append(str(result.serve_config))
    report = tmp_path / "failover.json"
    proc = cluster.cli(sys.executable, "-m", "tuner.promote.failover", "--primary", files[0], "--secondary", files[1],
                       "--name", "fs", "--route", "/fs", "--requests", "1", "--kill-primary", "--timeout", "300",
                       "--share-gpu", "--keep", "--report", str(report))
    admin = cluster.admin()
    try:
        out = proc.stdout
        assert proc.returncode == 0, out + proc.stderr
        assert "primary changed to share one GPU with the other failover side" in out, out
        assert "gpu_memory_utilization 0.95 -> 0.42" in out and "mem_fraction_static unset" in out, out
        assert out.index("deploying fs-primary\n") < out.index("deploying fs-secondary, fs (the primary runs)"), out
        assert "after kill #1: answered by secondary" in out, out
        result = json.loads(report.read_text())
        assert result["ok"] and result["before"] == ["primary"] and result["after"] == ["secondary"], result
        assert result["gpu_sharing"]["primary"]["deployed"] == 0.42
        assert result["gpu_sharing"]["secondary"]["memory_knob"] == "mem_fraction_static"
        primary = json.loads(cluster.get("/fs-primary/servetune"))  # the replica Serve started again
        secondary = json.loads(cluster.get("/fs-secondary/servetune"))
        assert primary["engine_args"] == {"max_num_seqs": 16, "gpu_memory_utilization": 0.42}, primary
        assert secondary["engine_args"] == {"max_running_requests": 24, "mem_fraction_static": 0.42}, secondary
        assert "share one GPU" in primary["lineage"]["gpu_sharing"], primary
        sim_info = json.loads(cluster.get("/fs-secondary/server_info"))  # what the simulated engine runs
        assert sim_info["mem_fraction_static"] == 0.42, sim_info
    finally:
        admin.apply({k: v for k, v in admin.declared_apps().items() if not k.startswith("fs")})


def test_a_config_that_cannot_start_is_rejected_with_the_engines_words(cluster: ServeCluster, staged: str) -> None:
    before = _serving(cluster)
    bad = make_study("life", sim={"flavour": "vllm", "gpu": "H200", "mode": "server",
                                  "faults": {"fail_at_start": True}})
    app = app_config(app_args(bad, make_trial(0, 3000, 300)), name="staging", route_prefix="/")
    result = deploy_blue_green(cluster.admin(), app, name="staging", route_prefix="/", timeout_s=300)
    assert not result.ok and "left as it was" in result.reason
    assert "start_failed" in result.reason and "fail-at-start" in result.reason  # the engine's own message
    assert _serving(cluster) == before
    smoke_test(cluster.http_base, "/", "qwen3-8b")
