"""SGLang: arguments checked by SGLang's own ServerArgs parser; the launcher against a stand-in server.

SGLang has no CPU build, so no real SGLang server runs here. Its parser does import without a GPU:
scripts/setup-vllm-cpu installs sglang (no GPU dependencies) into .venv-sglang-args for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.common.errors import SpecError
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.process import http_get, reserve_port
from tuner.spec.study import EngineSettings, ModelSpec

pytestmark = pytest.mark.timeout(300)

ARGS = {"max_running_requests": 128, "chunked_prefill_size": 256, "mem_fraction_static": 0.85,
        "schedule_policy": "lpm", "disable_radix_cache": True, "disable_cuda_graph": False,
        "speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 16, "attention_backend": "fa3",
        "max_model_len": 2048}


def _launch(settings: EngineSettings, tmp_path: Path) -> LaunchSpec:
    port, sock = reserve_port()
    model = ModelSpec(name="Qwen/Qwen3-8B", served_name="qwen3-8b", max_model_len=4096, load_format="dummy")
    return LaunchSpec(model=model, host="127.0.0.1", port=port, log_path=tmp_path / "sglang.log",
                      settings=settings, port_socket=sock)


def test_args_checked_by_sglang_server_args(sglang_args_python: Path, tmp_path: Path) -> None:
    engine = get_engine("sglang")
    launch = _launch(EngineSettings(python=str(sglang_args_python)), tmp_path)
    launch.port_socket.close()  # type: ignore[union-attr]
    engine.check_args(ARGS, launch)  # SGLang's own parser accepts the whole command line
    kinds = engine._kinds  # what the parser told us about each option
    assert kinds["disable_radix_cache"] == "switch" and kinds["max_running_requests"] == "value"
    argv = engine.argv(ARGS, launch)
    assert "--disable-radix-cache" in argv and "--disable-cuda-graph" not in argv
    assert argv[argv.index("--context-length") + 1] == "2048"

    with pytest.raises(SpecError, match="did you mean --max-running-requests") as err:
        engine.check_args({"max_running_request": 8}, launch)
    assert err.value.where == "args.max_running_request"
    with pytest.raises(SpecError, match="invalid choice: 'sjf'"):
        engine.check_args({"schedule_policy": "sjf"}, launch)
    with pytest.raises(SpecError, match="invalid float value"):
        engine.check_args({"mem_fraction_static": "most"}, launch)
    with pytest.raises(SpecError, match="no argument --max-num-seqs"):
        engine.check_args({"max_num_seqs": 8}, launch)  # a vLLM name SGLang does not have


def test_launcher_against_a_stand_in(standin: list[str], tmp_path: Path) -> None:
    """The real argv, process group, readiness, metrics and read-back paths, with a stand-in process."""
    engine = get_engine("sglang")
    settings = EngineSettings(command=[*standin, "--metrics-prefix", "sglang:"], check_args=True,
                              env={"SGLANG_TEST_MARK": "1"}, start_timeout_s=60)
    launch = _launch(settings, tmp_path)
    engine.check_args(ARGS, launch)  # a command prefix without `python`: names only, no engine import
    with engine.server(ARGS, launch) as srv:
        echoed = engine.resolved_config(srv.base_url)["argv"]
        status, body = http_get(srv.base_url + "/metrics", 10)
    assert echoed[echoed.index("--model-path") + 1] == "Qwen/Qwen3-8B"
    assert echoed[echoed.index("--max-running-requests") + 1] == "128"
    assert "--enable-metrics" in echoed and "--disable-radix-cache" in echoed
    assert json.loads(echoed[echoed.index("--port") + 1]) == launch.port
    assert status == 200 and engine.metrics_prefix + "num_requests_running" in body.decode()
    log = launch.log_path.read_text()
    assert "SGLANG_TEST_MARK" in log
