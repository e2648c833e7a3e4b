"""The sim engine's server face through Engine.server: flavour-named metrics and read-back config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.process import http_get, reserve_port
from tuner.spec.study import ModelSpec, SimSettings

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_sim_server_speaks_its_flavour(tmp_path: Path, flavour: str) -> None:
    engine = get_engine("sim")
    port, sock = reserve_port()
    knob = {"max_num_seqs": 48} if flavour == "vllm" else {"max_running_requests": 48}
    launch = LaunchSpec(model=ModelSpec(name="Qwen/Qwen3-8B", served_name="q8", max_model_len=4096),
                        host="127.0.0.1", port=port, log_path=tmp_path / "sim.log",
                        settings=SimSettings(flavour=flavour, mode="server", time_scale=50), port_socket=sock)
    engine.check_args(knob, launch)
    with engine.server(knob, launch) as srv:
        assert srv.start_seconds > 0
        prefix = engine.metrics_prefix_for(launch)
        assert prefix == f"{flavour}:" and engine.metrics_prefix == prefix
        status, body = http_get(srv.base_url + "/metrics", 10)
        assert status == 200 and prefix in body.decode()
        status, body = http_get(srv.base_url + "/v1/models", 10)
        assert b'"q8"' in body
        resolved = engine.resolved_config(srv.base_url)
        assert resolved, "sim /server_info answered nothing"
        assert resolved["flavour"] == flavour
        assert all(resolved[k] == v for k, v in knob.items())  # the knob the trial set is what it runs with
        assert srv.failure() is None
    assert not srv.alive()
