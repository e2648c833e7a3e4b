"""ray_cluster.yaml against Ray's own cluster-config schema; the KubeRay RayJob example against our CLI and spec."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from tuner.run.cli import parse_args
from tuner.spec.load import validate
from tuner.spec.study import Study

ROOT = Path(__file__).resolve().parents[2]


def _cluster() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "ray_cluster.yaml").read_text())


def test_cluster_config_passes_rays_schema() -> None:
    # What `ray up` does before launching anything: fill in the provider's defaults, then validate.
    validate_config(prepare_config(copy.deepcopy(_cluster())))


def test_schema_check_is_real() -> None:
    bad = _cluster()
    bad["available_node_types"]["worker.h200x8"]["gpus"] = 8  # not a field Ray knows
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(bad))


def test_cluster_shape_cpu_head_gpu_workers_servetune_installed() -> None:
    cfg = _cluster()
    types = cfg["available_node_types"]
    head = types[cfg["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0, "the head runs the driver, never a trial"
    gpu_types = [t for name, t in types.items() if name != cfg["head_node_type"] and t["resources"].get("GPU") == 8]
    assert gpu_types and all(t["max_workers"] >= 1 for t in gpu_types)
    assert cfg["docker"]["image"] and not cfg["docker"]["image"].startswith("rayproject/ray")
    assert any("pip install" in c and "/home/ray/servetune" in c for c in cfg["setup_commands"])
    assert cfg["file_mounts"]["/home/ray/servetune"] == "."
    # Token auth everywhere, with the same token file on every node.
    starts = cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]
    assert all("RAY_AUTH_MODE=token" in c for c in starts if "ray start" in c)
    assert "/home/ray/.ray/auth_token" in cfg["file_mounts"]
    assert "--dashboard-host=127.0.0.1" in " ".join(cfg["head_start_ray_commands"])


def _rayjob_docs() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "kuberay-rayjob.yaml").read_text()))
    return {d["kind"]: d for d in docs}


def test_rayjob_entrypoint_is_our_cli_and_study_is_valid() -> None:
    docs = _rayjob_docs()
    job = docs["RayJob"]
    assert job["apiVersion"] == "ray.io/v1"
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "tuner.run"]
    args = parse_args(argv[3:])
    assert str(args.study) == "/etc/servetune/study.yaml"
    assert str(args.output).startswith("/mnt/shared/")
    study = validate(Study, yaml.safe_load(docs["ConfigMap"]["data"]["study.yaml"]), "configmap study.yaml")
    assert study.engine_names == ["vllm"] and study.resources.gpus_per_trial == 1
    assert study.engines["vllm"].python == "/opt/engines/vllm/bin/python"


def test_rayjob_cluster_has_token_auth_gpu_workers_and_shared_output() -> None:
    docs = _rayjob_docs()
    spec = docs["RayJob"]["spec"]["rayClusterSpec"]
    assert spec["authOptions"]["mode"] == "token"
    major, minor, _ = (int(x) for x in spec["rayVersion"].split("."))
    assert (major, minor) >= (2, 52), "token auth needs Ray 2.52+"
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    workers = spec["workerGroupSpecs"]
    gpus = [int(w["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) for w in workers]
    assert gpus == [8]
    images = {head["image"]} | {w["template"]["spec"]["containers"][0]["image"] for w in workers}
    assert len(images) == 1, "head and workers must run the same image"
    claim = docs["PersistentVolumeClaim"]
    assert "ReadWriteMany" in claim["spec"]["accessModes"]
    for group in [spec["headGroupSpec"], *workers]:
        pod = group["template"]["spec"]
        mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert {"/mnt/shared", "/etc/servetune"} <= mounts
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert claims == [claim["metadata"]["name"]]
