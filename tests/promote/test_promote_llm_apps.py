"""The vLLM and SGLang Serve apps: LLMConfig fields from a promoted config, checked by Ray's own model.

Ray Serve LLM's LLMConfig validates without an engine installed; deploying needs GPUs (see
docs/promote.md and the H200 proof).
"""

from __future__ import annotations

import math

import pytest
from promote_factory import make_study, make_trial

from serve_apps import sglang, vllm
from tuner.promote.serve_config import accelerator_type, app_args

LLMConfig = pytest.importorskip("ray.llm._internal.serve.core.configs.llm_config").LLMConfig


def _trial(engine: str, args: dict):
    t = make_trial(0, 3000, 300)
    t.engine, t.args = engine, args
    t.resolved = {"gpu_name": "NVIDIA H200"}
    return t


def test_vllm_app_carries_the_tuned_args_accelerator_and_capacity_derived_scaling() -> None:
    study = make_study(engine="vllm", capacity={"mode": "concurrency", "low": 1, "high": 256},
                       promotion={"replicas": 2})
    tuned = {"max_num_seqs": 128, "max_num_batched_tokens": 8192, "enable_chunked_prefill": True,
             "speculative_config": {"method": "ngram", "num_speculative_tokens": 4}, "port": 9999}
    trial = _trial("vllm", tuned)
    trial.capacity = 48.0
    fields = vllm.llm_config(app_args(study, trial).model_dump(mode="json"))
    cfg = LLMConfig(**fields)
    assert cfg.accelerator_type == "H200"
    kwargs = cfg.engine_kwargs
    assert kwargs["max_num_seqs"] == 128 and kwargs["enable_chunked_prefill"] is True
    assert kwargs["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 4}
    assert "port" not in kwargs  # Serve owns the front end
    assert kwargs["max_model_len"] == 8192 and kwargs["dtype"] == "bfloat16"
    dep = cfg.deployment_config
    assert dep["autoscaling_config"]["min_replicas"] == 2 and dep["autoscaling_config"]["max_replicas"] == 4
    assert dep["autoscaling_config"]["target_ongoing_requests"] == 48.0  # concurrency mode: capacity itself
    assert dep["max_ongoing_requests"] == math.ceil(48 * 1.25)
    assert cfg.model_loading_config.model_id == "qwen3-8b"


def test_sglang_app_uses_ray_serve_llm_sglang_server_with_server_args_names() -> None:
    study = make_study(engine="sglang")
    trial = _trial("sglang", {"mem_fraction_static": 0.82, "chunked_prefill_size": 4096,
                              "max_running_requests": 128, "tensor_parallel_size": 1})
    fields = sglang.llm_config(app_args(study, trial).model_dump(mode="json"))
    assert fields.pop("server_cls") == sglang.SERVER_CLS
    cfg = LLMConfig(**fields)
    kwargs = cfg.engine_kwargs
    assert kwargs["model_path"] == "Qwen/Qwen3-8B" and kwargs["context_length"] == 8192
    assert kwargs["mem_fraction_static"] == 0.82 and kwargs["tp_size"] == 1
    assert "tensor_parallel_size" not in kwargs


def test_builders_refuse_another_engines_config() -> None:
    study = make_study()
    args = app_args(study, make_trial(0, 3000, 300)).model_dump(mode="json")
    with pytest.raises(ValueError, match="builds engine 'vllm'"):
        vllm.llm_config(args)


@pytest.mark.parametrize(("name", "ray_type"), [
    ("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA A100-SXM4-80GB", "A100-80G"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA H20", "H20"), ("some CPU", None),
])
def test_gpu_names_map_to_ray_accelerator_types(name: str, ray_type: str | None) -> None:
    assert accelerator_type(name) == ray_type
