"""Trial config -> command line, for vLLM, SGLang and the sim engine (no engine needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tuner.common.errors import SpecError
from tuner.engines import get_engine
from tuner.engines.args import cli_flags
from tuner.engines.base import LaunchSpec
from tuner.spec.study import EngineSettings, ModelSpec, SimSettings

SPEC = {"method": "dflash", "model": "z-lab/Qwen3.6-27B-DFlash", "num_speculative_tokens": 15}


def launch(settings: EngineSettings | SimSettings | None = None, **model: object) -> LaunchSpec:
    m = ModelSpec(**{"name": "/models/Qwen3-8B", "served_name": "qwen3-8b", "max_model_len": 4096, **model})
    return LaunchSpec(model=m, host="127.0.0.1", port=8123, log_path=Path("/tmp/x.log"),
                      settings=settings or EngineSettings())


def after(argv: list[str], opt: str) -> str:
    return argv[argv.index(opt) + 1]


def test_flag_rule() -> None:
    args = {"max_num_seqs": 64, "enable_prefix_caching": False, "enforce_eager": True, "kv_cache_dtype": None,
            "speculative_config": SPEC, "cuda_graph_sizes": [1, 2, 4], "gpu_memory_utilization": 0.9}
    flags = cli_flags(args, {"enable_prefix_caching"})
    assert flags == ["--max-num-seqs", "64", "--no-enable-prefix-caching", "--enforce-eager",
                     "--speculative-config", json.dumps(SPEC), "--cuda-graph-sizes", "[1, 2, 4]",
                     "--gpu-memory-utilization", "0.9"]
    assert cli_flags({"disable_radix_cache": False}, set()) == []  # not negatable: False means absent


def test_vllm_argv() -> None:
    eng = get_engine("vllm")
    argv = eng.argv({"max_num_seqs": 128, "enable_chunked_prefill": False, "speculative_config": SPEC,
                     "compilation_config": {"mode": 3, "cudagraph_capture_sizes": [1, 8]}},
                    launch(load_format="dummy", trust_remote_code=True, tokenizer="/tok"))
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert after(argv, "--model") == "/models/Qwen3-8B" and after(argv, "--served-model-name") == "qwen3-8b"
    assert after(argv, "--port") == "8123" and after(argv, "--host") == "127.0.0.1"
    assert after(argv, "--max-model-len") == "4096" and after(argv, "--load-format") == "dummy"
    assert after(argv, "--tokenizer") == "/tok" and "--trust-remote-code" in argv
    assert "--no-enable-chunked-prefill" in argv
    assert json.loads(after(argv, "--speculative-config")) == SPEC
    assert json.loads(after(argv, "--compilation-config"))["cudagraph_capture_sizes"] == [1, 8]


def test_vllm_trial_overrides_spec_values_once() -> None:
    argv = get_engine("vllm").argv({"max_model_len": 2048, "tensor_parallel_size": 2}, launch())
    assert argv.count("--max-model-len") == 1 and after(argv, "--max-model-len") == "2048"
    assert argv.count("--tensor-parallel-size") == 1 and after(argv, "--tensor-parallel-size") == "2"
    assert "--trust-remote-code" not in get_engine("vllm").argv({}, launch())  # never on by default


def test_vllm_env_and_interpreter() -> None:
    eng = get_engine("vllm")
    lp = launch(EngineSettings(python="/opt/vllm/bin/python", env={"HF_HUB_OFFLINE": "1"}))
    lp.gpu_ids = [2, 3]
    assert eng.argv({}, lp)[0] == "/opt/vllm/bin/python"
    env = eng.env(lp)
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    cmd = eng.argv({}, launch(EngineSettings(command=["vllm", "serve"])))
    assert cmd[:3] == ["vllm", "serve", "--model"]


@pytest.mark.parametrize("bad", [{"model": "other"}, {"port": 1}, {"served_model_name": "x"},
                                 {"max-num-seqs": 3}, {"max_num_seqs --port 1": 3}])
def test_reserved_or_malformed_names_are_bad_input(bad: dict[str, object]) -> None:
    with pytest.raises(SpecError):
        get_engine("vllm").argv(bad, launch())


def test_sglang_argv() -> None:
    eng = get_engine("sglang")
    argv = eng.argv({"max_running_requests": 128, "chunked_prefill_size": 256, "disable_radix_cache": True,
                     "disable_cuda_graph": False, "speculative_num_draft_tokens": 16}, launch(load_format="dummy"))
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert after(argv, "--model-path") == "/models/Qwen3-8B" and after(argv, "--context-length") == "4096"
    assert after(argv, "--tp-size") == "1" and "--enable-metrics" in argv
    assert "--disable-radix-cache" in argv and "--disable-cuda-graph" not in argv
    assert not any(a.startswith("--no-") for a in argv)
    assert after(argv, "--speculative-num-draft-tokens") == "16"
    argv = eng.argv({"max_model_len": 1024}, launch())  # a vLLM name shared across engines
    assert argv.count("--context-length") == 1 and after(argv, "--context-length") == "1024"
    assert eng.metrics_prefix == "sglang:"


def test_sim_argv_and_faults() -> None:
    eng = get_engine("sim")
    s = SimSettings(flavour="sglang", gpu="H100", time_scale=20,
                    faults={"crash_after": 5, "fail_at_start": True, "never_ready": False, "http500_rate": 0.1})
    lp = launch(s, shape="qwen3-8b")
    argv = eng.argv({"max_running_requests": 32, "disable_radix_cache": True}, lp)
    assert argv[:3] == [sys.executable, "-m", "tuner.sim.server"]
    assert after(argv, "--flavour") == "sglang" and after(argv, "--gpu") == "H100"
    assert after(argv, "--shape") == "qwen3-8b" and after(argv, "--time-scale") == "20.0"
    assert after(argv, "--fault-crash-after") == "5" and "--fault-fail-at-start" in argv
    assert "--fault-never-ready" not in argv and after(argv, "--fault-http500-rate") == "0.1"
    assert eng.metrics_prefix_for(lp) == "sglang:" and eng.metrics_prefix == "sglang:"
    assert "PYTHONPATH" in eng.env(lp)
    with pytest.raises(SpecError):
        eng.argv({}, launch(SimSettings(faults={"explode": True}), shape="qwen3-8b"))


def test_sim_check_args_uses_the_knob_table() -> None:
    eng = get_engine("sim")
    lp = launch(SimSettings(flavour="vllm"), shape="qwen3-8b")
    eng.check_args({"max_num_seqs": 64, "enable_prefix_caching": False}, lp)
    with pytest.raises(SpecError):
        eng.check_args({"max_running_requests": 64}, lp)  # an SGLang knob on the vLLM flavour
    argv = eng.argv({"enable_prefix_caching": False}, lp)
    assert "--no-enable-prefix-caching" in argv and eng.metrics_prefix_for(lp) == "vllm:"


def test_check_skips_when_engine_not_importable(tmp_path: Path) -> None:
    """Our own interpreter has no vLLM: names are still checked, values are left to the engine."""
    pytest.importorskip("pydantic")
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is importable here")
    except ImportError:
        pass
    eng = get_engine("vllm")
    eng.check_args({"max_num_seqs": 8}, launch())  # no error: not importable, so not checked
    with pytest.raises(SpecError):
        eng.check_args({"port": 8}, launch())
