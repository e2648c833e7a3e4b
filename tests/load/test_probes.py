"""Prometheus text -> probe sample: only the engine's names, summed over label sets, first name found wins."""

from __future__ import annotations

from tuner.load.probes import parse_prometheus

NAMES = {"running": ("num_requests_running",), "waiting": ("num_requests_waiting",),
         "kv_cache_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
         "preemptions": ("num_preemptions_total", "num_preemptions")}


def test_parse_picks_wanted_names_only() -> None:
    text = ('vllm:num_requests_running{model_name="m",engine="0"} 3.0\n'
            'vllm:num_requests_running{model_name="m",engine="1"} 2\n'
            "vllm:num_requests_running_extra 9\n"  # a longer name: not ours
            'vllm:num_preemptions_total{a="}"} 7\n'
            "vllm:gpu_cache_usage_perc 0.5\n"
            "sglang:num_requests_waiting 4\n"  # another engine's prefix
            "# HELP vllm:num_requests_waiting waiting\n"
            "vllm:num_requests_waiting\t1 1700000000")  # tab, timestamp, no final newline
    assert parse_prometheus(text, "vllm:", NAMES) == {"running": 5.0, "waiting": 1.0, "kv_cache_usage": 0.5,
                                                      "preemptions": 7.0}
    assert parse_prometheus(text, "sglang:", {"waiting": ("num_requests_waiting",)}) == {"waiting": 4.0}
    assert parse_prometheus("vllm:num_requests_running NaNx\n", "vllm:", NAMES) == {}
    assert parse_prometheus(text, "vllm:", {}) == {}
