"""The early-stop problem the H200 run found, against a real streaming server (fixed in tuner.load).

Requests that stream for longer than the TTFT limit (512 tokens took 5-10 s on the H200) must not
count as "still waiting for their first token", and a load point's ramp-up is not saturation. The
fake server (tests/load/fake_server.py) streams 150 tokens 20 ms apart after a 50 ms first token:
3 s per request against a 2 s TTFT limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "tests" / "load" / "fake_server.py"

CASE = r"""
import json, sys
sys.path.insert(0, {repo!r}); sys.path.insert(0, {scripts!r})
from tuner.load.capacity import measure_point
from tuner.load.target import HttpTarget
from tuner.spec.sla import parse_sla
from tuner.spec.study import CapacitySettings
from tuner.spec.workload import Workload
wl = Workload.model_validate({{"classes": [{{"name": "long", "weight": 1, "input": {{"dist": "fixed", "value": 32}},
                                             "output": {{"dist": "fixed", "value": 150}}}}],
                              "warmup_requests": 0}})
settings = CapacitySettings(low=4, high=4, max_points=1, duration_s=3, request_timeout_s=30)
target = HttpTarget({url!r}, "fake", timeout_s=30)
point, records = measure_point(target, wl, parse_sla(["p99_ttft_ms <= 2000"]), settings, 4.0, seed=0)
print(json.dumps({{"feasible": point.feasible, "stopped": point.stopped_early,
                  "completed": point.summary.get("completed"), "ttft_p99": point.summary.get("p99_ttft_ms")}}))
"""


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--ttft-ms", "50", "--itl-ms", "20"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    proc.terminate()
    proc.wait(10)


def run_case(url: str) -> dict[str, object]:
    code = CASE.format(repo=str(REPO), scripts=str(REPO / "scripts" / "h200"), url=url)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_streams_longer_than_the_ttft_limit_are_not_stopped(server_url: str) -> None:
    got = run_case(server_url)
    assert got["feasible"] is True and got["stopped"] is None, got
    assert got["completed"] == 12 and got["ttft_p99"] < 2000, got
