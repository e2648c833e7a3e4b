"""Failure classes from exit status + log tail, quoting the engine.

tests/engines/logs/ holds real logs of vLLM 0.32 (CPU) failing to start, captured through
ServerProcess with scripts/setup-vllm-cpu's environment (paths shortened to /repo/).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.engines import failures, get_engine
from tuner.trial.outcome import TrialOutcome

LOGS = Path(__file__).with_name("logs")


@pytest.mark.parametrize(("name", "outcome", "quote"), [
    ("bs16", TrialOutcome.START_FAILED, "No common block size for 16"),
    ("defmem", TrialOutcome.OOM, "less than desired CPU memory utilization (0.92"),
    ("kvsmall", TrialOutcome.OOM, "larger than the available KV cache memory"),
    ("mns", TrialOutcome.START_FAILED, "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (64)"),
])
def test_real_vllm_start_failures(name: str, outcome: TrialOutcome, quote: str) -> None:
    tail = (LOGS / f"vllm-0.32-cpu-{name}.log").read_text()
    got, reason = get_engine("vllm").classify(1, tail)
    assert got is outcome, reason
    assert quote in reason and "exit 1" in reason
    assert "\n" not in reason and len(reason) <= failures.MAX_REASON
    assert "input_value=" not in reason  # pydantic's echo of the whole config is cut


@pytest.mark.parametrize(("engine", "rc", "tail", "outcome", "quote"), [
    ("vllm", 1, "(EngineCore_DP0 pid=7) ERROR 11-29 10:00:00 [core.py:1] torch.OutOfMemoryError: CUDA out of "
     "memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 139.81 GiB",
     TrialOutcome.OOM, "CUDA out of memory"),
    ("vllm", 1, "INFO 11-29 10:00:00 [parallel.py:746] Address already in use. Retrying with a new port.\n"
     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
     TrialOutcome.OOM, "No available memory for the cache blocks"),
    ("vllm", 1, "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): "
     "address already in use", TrialOutcome.START_FAILED, "[Errno 98]"),
    ("vllm", 2, "api_server.py: error: argument --max-num-seqs: invalid int value: 'x'",
     TrialOutcome.START_FAILED, "invalid int value"),
    ("sglang", -9, "[2026-11-29 10:00:00] RuntimeError: Not enough memory. Please try to increase "
     "--mem-fraction-static. Current value: mem_fraction_static=0.5\n[2026-11-29 10:00:01] Received sigquit "
     "from a child process. It usually means the child failed.", TrialOutcome.OOM, "mem_fraction_static=0.5"),
    ("vllm", -9, "INFO 11-29 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 10.0 tokens/s",
     TrialOutcome.START_FAILED, "SIGKILL"),
])
def test_messages(engine: str, rc: int, tail: str, outcome: TrialOutcome, quote: str) -> None:
    got, reason = get_engine(engine).classify(rc, tail)
    assert got is outcome, reason
    assert quote in reason


def test_a_worker_killed_by_a_signal_is_a_crash_not_a_bad_config() -> None:
    """A real log: vLLM CPU 0.32 on an AMX host without scripts/setup-vllm-cpu's hook, its worker killed by SIGILL on
    the first request (docs/engines.md). Before, the aborted requests' "RuntimeError: cancelled" read as a bad config."""
    tail = (LOGS / "vllm-0.32-cpu-sigill.log").read_text()
    assert "RuntimeError: cancelled" in tail
    got, reason = failures.under_load(*get_engine("vllm").classify(0, tail))
    assert got is TrialOutcome.CRASHED and "engine worker killed by SIGILL" in reason, reason
    assert "invalid config" not in reason
    # a worker that raised reports "exit code: None": the engine's own message stays the cause
    assert "died unexpectedly (exit code: None)" in (LOGS / "vllm-0.32-cpu-bs16.log").read_text()
    oom = "Worker proc VllmWorker-0 died unexpectedly (exit code: -9)\ntorch.OutOfMemoryError: CUDA out of memory"
    assert failures.classify(1, oom)[0] is TrialOutcome.OOM  # it said why: the memory


def test_prefixes_are_cleaned() -> None:
    line = "\x1b[1;36m(EngineCore_DP0 pid=123)\x1b[0m ERROR 11-29 19:00:00 [core.py:42] ValueError: bad thing"
    assert failures.clean(line) == "ValueError: bad thing"


def test_never_ready_is_timeout_even_with_a_stray_error() -> None:
    got, reason = failures.classify(None, "WARNING ... ValueError: something harmless\nstill loading")
    assert got is TrialOutcome.TIMEOUT and "deadline" in reason
    got, _ = failures.classify(None, "torch.OutOfMemoryError: CUDA out of memory")
    assert got is TrialOutcome.OOM  # alive but it said OOM: the memory is the cause


def test_under_load() -> None:
    assert failures.under_load(TrialOutcome.START_FAILED, "x")[0] is TrialOutcome.CRASHED
    assert failures.under_load(TrialOutcome.OOM, "CUDA out of memory")[0] is TrialOutcome.OOM
