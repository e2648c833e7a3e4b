"""Output-changing levers: opt-in guard, structured args, constraint repair, labels, output-check verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from tuner.common.errors import SpecError
from tuner.search.space import build_space
from tuner.spec import levers
from tuner.spec.study import Study

ROOT = Path(__file__).resolve().parents[2]
DFLASH = {"methods": {"dflash": {"draft_model": "z-lab/Qwen3-8B-DFlash-b16"}}}


def study(engine: str = "sim", **over: Any) -> Study:
    d = yaml.safe_load((ROOT / "studies" / "default.yaml").read_text())
    d["engine"] = engine
    d.update(over)
    return Study.model_validate(d)


def sample_many(st: Study, n: int = 60) -> list[dict[str, Any]]:
    space = build_space(st)
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    out = []
    for _ in range(n):
        engine, values = space.sample(opt.ask())
        args, _ = space.engines[engine].apply_constraints(values)
        out.append(args)
    return out


def test_without_allow_output_changing_knobs_stay_at_baseline() -> None:
    st = study()
    space = build_space(st).engines["sim"]
    for name in ("kv_cache_dtype", "quantization", "speculative_config.method"):
        assert name not in space.params
        assert "allow" in space.pinned[name]
    for args in sample_many(st):
        assert levers.labels(args) == []
        assert "speculative_config" not in args and "quantization" not in args


def test_allow_opens_each_class_and_every_config_is_labelled() -> None:
    st = study(allow=["fp8_weights", "fp8_kv_cache", "speculative_decoding"], speculative=DFLASH)
    seen: set[str] = set()
    for args in sample_many(st, 120):
        labels = levers.labels(args)
        seen.update(labels)
        assert ("fp8_weights" in labels) == (args.get("quantization") == "fp8")
        assert ("fp8_kv_cache" in labels) == (args.get("kv_cache_dtype") == "fp8")
        spec = args.get("speculative_config")
        assert ("speculative_decoding" in labels) == (spec is not None)
        if spec is not None:
            assert spec["method"] in ("ngram", "dflash")  # eagle3/mtp: the study names no such method
            assert 1 <= spec["num_speculative_tokens"] <= 16
            if spec["method"] == "dflash":
                assert spec["model"] == "z-lab/Qwen3-8B-DFlash-b16"  # from the study, never sampled
            else:
                assert "model" not in spec and spec["prompt_lookup_min"] <= spec["prompt_lookup_max"]
            # CUDA graphs and the token budget must cover every sequence's 1 + k verify tokens
            width = 1 + spec["num_speculative_tokens"]
            assert args["max_num_batched_tokens"] >= args["max_num_seqs"] * width
            if args.get("max_cudagraph_capture_size") is not None:
                assert args["max_cudagraph_capture_size"] >= args["max_num_seqs"] * width
    assert seen == {"fp8_weights", "fp8_kv_cache", "speculative_decoding"}


def test_draft_model_methods_only_when_the_study_names_a_draft() -> None:
    st = study(allow=["speculative_decoding"])
    method = build_space(st).engines["sim"].params["speculative_config.method"]
    assert method.choices == ["none", "ngram"]
    with pytest.raises(Exception, match="needs draft_model"):
        study(allow=["speculative_decoding"], speculative={"methods": {"eagle3": {}}})


def test_sglang_space_folds_the_draft_path_and_drops_none() -> None:
    st = study(engine="sglang", allow=["speculative_decoding", "fp8_kv_cache"], speculative=DFLASH)
    for args in sample_many(st, 80):
        algo = args.get("speculative_algorithm")
        assert algo in (None, "NGRAM", "DFLASH")
        assert ("speculative_draft_model_path" in args) == (algo == "DFLASH")
        assert "quantization" not in args  # not allowed, and "none" is never passed


def test_fixed_output_changing_arg_without_allow_is_bad_input() -> None:
    st = study(search_space={"fixed": {"kv_cache_dtype": "fp8"}})
    with pytest.raises(SpecError, match="allow: \\[fp8_kv_cache\\]"):
        build_space(st)
    build_space(study(search_space={"fixed": {"kv_cache_dtype": "fp8"}}, allow=["fp8_kv_cache"]))


def test_output_check_is_never_passed_with_random_weights() -> None:
    args = {"quantization": "fp8"}
    assert levers.output_check(study(allow=["fp8_weights"], output_check="required"), args).startswith(
        "not_applicable")
    real = study(engine="vllm", allow=["fp8_weights"], output_check="required")
    assert levers.output_check(real, args).startswith("not_run")
    dummy = study(engine="vllm", allow=["fp8_weights"], output_check="required",
                  model={"name": "Qwen/Qwen3-8B", "load_format": "dummy"})
    assert levers.output_check(dummy, args).startswith("not_applicable")
    assert levers.output_check(real, {}) == "not_needed"


def test_layout_gpus() -> None:
    assert levers.gpus({"tensor_parallel_size": 2, "data_parallel_size": 3}) == 6
    assert levers.gpus({"tp_size": 4}) == 4
    assert levers.gpus({}, model_tp=2) == 2


def test_oom_rules_hold_only_for_the_same_precision_and_layout() -> None:
    from tuner.search.feasibility import FeasibilityModel
    from tuner.trial.outcome import TrialOutcome

    st = study(engine="vllm", allow=["fp8_weights"],
               search_space={"overrides": {"tensor_parallel_size": {"choices": [1, 2]}}})
    model = FeasibilityModel(build_space(st).engines, use_classifier=False)
    big = {"max_num_seqs": 512, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.95}
    model.observe("vllm", big, TrialOutcome.OOM, 1)
    assert model.predict("vllm", {**big, "max_num_seqs": 600}) is not None
    assert model.predict("vllm", {**big, "max_num_seqs": 600, "quantization": "fp8"}) is None
    assert model.predict("vllm", {**big, "max_num_seqs": 600, "tensor_parallel_size": 2}) is None


def test_trial_resources_follow_the_layout() -> None:
    from tuner.run.ray_executor import layout_resources

    st = study(engine="vllm", resources={"gpus_per_trial": 1, "cpus_per_trial": 2})
    per_trial = layout_resources(st, "vllm")
    assert per_trial({"args": {"tensor_parallel_size": 2, "data_parallel_size": 2}}).bundles == [{"CPU": 2.0, "GPU": 4.0}]
    assert per_trial({"args": {"max_num_seqs": 64}}).bundles == [{"CPU": 2.0, "GPU": 1.0}]
    sim = layout_resources(study(), "sim")  # simulated trials hold no GPU, whatever the layout
    assert sim({"args": {"tensor_parallel_size": 2}}).bundles == [{"CPU": 1.0}]
