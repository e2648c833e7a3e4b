"""The engine's own server inside a Serve replica (serve_apps.engine_process), with a real engine.

Ray Serve LLM here cannot load vLLM (it is not installed in this interpreter), as on the H200 host where
Ray 2.60's Serve LLM needs vLLM 0.29 and the bundle carries 0.26: `server: auto` must then serve the
promoted vLLM config through `vllm serve`'s own OpenAI server (real vLLM on CPU, tiny Qwen3) behind the
Serve proxy, stream chat, and stop the engine when the app goes. In-place deploys (one engine's room)
put the previous config back when the new one fails its check.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from promote_factory import make_trial, study_data
from serve_cluster import ServeCluster, serve_cluster

from serve_apps import vllm
from serve_apps.args import parse_args
from serve_apps.engine_process import EngineServer, replica_gpus
from serve_apps.llm_common import ray_llm_builder
from tests.engines.conftest import find_vllm_cpu_env
from tuner.promote.canary import failed_canary
from tuner.promote.deploy import deploy_in_place
from tuner.promote.serve_config import app_args, app_config
from tuner.spec.study import Study

CPU_ARGS = {"enforce_eager": True, "kv_cache_memory_bytes": 64 * 2**20, "max_num_batched_tokens": 1024}


def _study(python: str, model: str, *, secret: str = "") -> Study:
    data = study_data("proc", engine="vllm",
                      model={"name": model, "served_name": "tiny", "tokenizer": model, "max_model_len": 1024},
                      engines={"vllm": {"python": python, "start_timeout_s": 300, "stop_timeout_s": 20,
                                        "env": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                                **({"HF_TOKEN": secret} if secret else {})}}},
                      promotion={"confirm_runs": 0, "top_k": 1})
    data.pop("sim")
    return Study.model_validate(data)


def _trial(max_num_seqs: int):
    t = make_trial(0, 3000, 300, max_num_seqs=max_num_seqs)
    t.engine, t.args = "vllm", {**CPU_ARGS, "max_num_seqs": max_num_seqs}
    return t


def test_auto_falls_back_to_the_engines_own_server_when_ray_serve_llm_cannot_load_it() -> None:
    assert isinstance(ray_llm_builder(), str)  # the premise: Ray Serve LLM cannot load vLLM here
    study = _study("python3", "/models/x", secret="hf_abcdefghijklmnop")
    args = app_args(study, _trial(8))
    assert args.engine_settings is not None and args.engine_settings.python == "python3"
    assert "HF_TOKEN" not in args.engine_settings.env and args.engine_settings.env["HF_HUB_OFFLINE"] == "1"
    assert args.workdir == os.getcwd()
    app = vllm.build_app(args.model_dump(mode="json"))
    dep = app._bound_deployment  # the deployment the app binds (Ray's Application holds it)
    assert dep.func_or_class is EngineServer.func_or_class
    assert "num_gpus" not in dep.ray_actor_options  # no Ray cluster with GPUs here: vLLM on CPU holds none
    layout = parse_args({**args.model_dump(mode="json"),
                         "engine_args": {"tensor_parallel_size": 2, "data_parallel_size": 2}})
    assert replica_gpus(layout, cluster_gpus=8) == 4 and replica_gpus(args, cluster_gpus=1) == 1
    assert replica_gpus(layout, cluster_gpus=0) == 0
    asked = parse_args({**args.model_dump(mode="json"), "server": "ray_llm"})
    with pytest.raises(ImportError, match="server: process"):
        vllm.build_app(asked.model_dump(mode="json"))


@pytest.fixture(scope="module")
def cpu_vllm() -> tuple[str, str]:
    found = find_vllm_cpu_env()
    if isinstance(found, str):
        pytest.skip(found)
    return str(found[0]), str(found[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[ServeCluster]:
    with serve_cluster() as c:
        yield c


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.mark.slow
def test_vllm_serves_streaming_chat_through_its_own_server_and_in_place_deploys_roll_back(
        cluster: ServeCluster, cpu_vllm: tuple[str, str]) -> None:
    python, model = cpu_vllm
    study = _study(python, model)
    admin = cluster.admin()
    # the CPU cluster has no GPU: the replica asks for none, as the trials on it held none
    first = app_config(app_args(study, _trial(4)), name="proc", route_prefix="/proc")
    result = deploy_in_place(admin, first, name="proc", route_prefix="/proc", timeout_s=600, smoke_timeout_s=180)
    assert result.ok, result.reason
    assert result.smoke is not None and result.smoke.chunks >= 2, result.smoke  # streamed, chunk by chunk
    served = json.loads(cluster.get("/proc/servetune"))
    assert served["server"] == "process" and served["engine_args"]["max_num_seqs"] == 4
    log = Path(served["engine_log"]).read_text()
    assert "vllm" in log.lower()
    models = json.loads(cluster.get("/proc/v1/models"))  # the engine's own API through the proxy
    assert [m["id"] for m in models["data"]] == ["tiny"]
    pid_first = served["engine_pid"]

    second = app_config(app_args(study, _trial(8)), name="proc", route_prefix="/proc")
    refused = deploy_in_place(admin, second, name="proc", route_prefix="/proc", timeout_s=600, smoke_timeout_s=180,
                              check=lambda base, prefix: failed_canary("test: this canary always fails"))
    assert not refused.ok and refused.rolled_back, refused.reason
    assert "serves the previous config again" in refused.reason
    assert not _alive(pid_first)  # in place: the first engine stopped before the second started
    back = json.loads(cluster.get("/proc/servetune"))
    assert back["engine_args"]["max_num_seqs"] == 4 and back["engine_pid"] != pid_first

    admin.apply({k: v for k, v in admin.declared_apps().items() if k != "proc"})
    admin.wait_gone("proc", 300)
    assert not _alive(back["engine_pid"])  # clean shutdown: the app's engine went with it
