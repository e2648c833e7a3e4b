"""`tuner.promote.failover --share-gpu`: two promoted engine configs on one GPU.

What the option promises, checked on the real builders (no GPU needed): each side's replica asks Ray
for half a GPU (the process app's actor options; Ray Serve LLM's placement bundles, validated by Ray's
own LLMConfig), each engine's memory knob is capped at the share (lowered only), the change is served
in the lineage; bad shares and configs that cannot share exit 2 before anything is deployed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from promote_factory import make_study, make_trial

from serve_apps import sglang, vllm
from serve_apps.args import parse_args
from serve_apps.engine_process import build
from tuner.promote.failover import main
from tuner.promote.serve_config import (
    DEFAULT_GPU_SHARE,
    app_args,
    app_config,
    serve_config,
    share_gpu,
    write_config,
)

LLMConfig = pytest.importorskip("ray.llm._internal.serve.core.configs.llm_config").LLMConfig


def _app(engine: str, args: dict[str, Any]) -> dict[str, Any]:
    t = make_trial(0, 3000, 300)
    t.engine, t.args = engine, args
    t.resolved = {"gpu_name": "NVIDIA H200"}
    return app_config(app_args(make_study(engine=engine), t), name=engine, route_prefix=f"/{engine}")


def test_share_caps_engine_memory_and_asks_ray_for_half_a_gpu_on_both_serving_paths() -> None:
    vllm_app, change = share_gpu(_app("vllm", {"gpu_memory_utilization": 0.92, "max_num_seqs": 128}), 0.42)
    args = parse_args(vllm_app["args"])
    assert args.engine_args == {"gpu_memory_utilization": 0.42, "max_num_seqs": 128}
    assert args.gpu_fraction == 0.5 and change["ray_num_gpus"] == 0.5
    assert change["tuned"] == 0.92 and change["deployed"] == 0.42
    assert "gpu_memory_utilization 0.92 -> 0.42" in args.lineage["gpu_sharing"]
    assert "Ray num_gpus 0.5" in args.lineage["gpu_sharing"]
    # the engine's own server in the replica (server: process, what the H200 runs): half a GPU
    dep = build(args, cluster_gpus=1.0)._bound_deployment
    assert dep.ray_actor_options["num_gpus"] == 0.5
    # Ray Serve LLM: one fractional bundle per vLLM worker
    cfg = LLMConfig(**vllm.llm_config(args))
    assert cfg.placement_group_config == {"bundle_per_worker": {"GPU": 0.5}}
    assert cfg.engine_kwargs["gpu_memory_utilization"] == 0.42

    sglang_app, change = share_gpu(_app("sglang", {"max_running_requests": 64}), DEFAULT_GPU_SHARE)
    args = parse_args(sglang_app["args"])
    assert args.engine_args["mem_fraction_static"] == 0.42 and change["tuned"] is None
    assert "mem_fraction_static unset (engine default) -> 0.42" in args.lineage["gpu_sharing"]
    fields = sglang.llm_config(args)
    fields.pop("server_cls")
    cfg = LLMConfig(**fields)
    assert cfg.placement_group_config["placement_group_bundles"] == [{"CPU": 0.25, "GPU": 0.5}]
    assert cfg.accelerator_config.kind == "gpu"
    assert cfg.engine_kwargs["mem_fraction_static"] == 0.42
    assert build(args, cluster_gpus=1.0)._bound_deployment.ray_actor_options["num_gpus"] == 0.5


def test_a_smaller_tuned_memory_value_is_kept_and_whole_gpus_stay_without_the_option() -> None:
    app = _app("sglang", {"mem_fraction_static": 0.3})
    shared, change = share_gpu(app, 0.42)
    assert parse_args(shared["args"]).engine_args["mem_fraction_static"] == 0.3
    assert change["deployed"] == 0.3 and "mem_fraction_static 0.3 kept" in change["note"]
    plain = parse_args(app["args"])
    assert plain.gpu_fraction is None and "placement_group_config" not in vllm.llm_config(
        parse_args(_app("vllm", {})["args"]))
    assert build(plain, cluster_gpus=1.0)._bound_deployment.ray_actor_options["num_gpus"] == 1


@pytest.fixture
def promoted(tmp_path: Path) -> dict[str, str]:
    files = {}
    for name, engine, args in (("vllm", "vllm", {"max_num_seqs": 64}), ("sglang", "sglang", {}),
                               ("tp2", "vllm", {"tensor_parallel_size": 2})):
        files[name] = str(write_config(serve_config([_app(engine, args)]), tmp_path / name / "promoted.yaml"))
    return files


@pytest.mark.parametrize("share", ["0", "0.6", "-0.1", "nan", "1"])
def test_an_invalid_share_exits_2_before_anything_deploys(share: str, promoted: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # no Ray runs at this address: exit 2 naming --share-gpu proves the check came before any deploy
    rc = main(["--primary", promoted["vllm"], "--secondary", promoted["sglang"], "--share-gpu", share,
               "--address", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"--share-gpu {float(share)}" in err and "> 0 and <= 0.45" in err and "--share-gpu 0.42" in err, err


def test_a_config_on_two_gpus_cannot_share_one(promoted: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--primary", promoted["vllm"], "--secondary", promoted["tp2"], "--share-gpu",
               "--address", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "cannot share one GPU" in err and "runs on 2 GPUs" in err and "--secondary" in err, err
    with pytest.raises(SystemExit) as exc:  # not a number: argparse's own exit 2
        main(["--primary", promoted["vllm"], "--secondary", promoted["sglang"], "--share-gpu", "half"])
    assert exc.value.code == 2
