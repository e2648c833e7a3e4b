"""Prometheus text for the sim server, under vLLM's metric names (and SGLang's for that flavour)."""

from __future__ import annotations

from tuner.sim.live import LiveEngine

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


class Metrics:
    """Counters and the TTFT histogram that outlive the per-step engine state."""

    def __init__(self, live: LiveEngine, model: str, flavour: str) -> None:
        self.live = live
        self.model = model
        self.flavour = flavour
        self.buckets = [0] * len(TTFT_BUCKETS)
        self.ttft_count = 0
        self.ttft_sum = 0.0
        self.prompt_tokens = 0  # tokens of accepted prompts (not recomputation)

    def _drain(self) -> None:
        for t in self.live.ttfts:
            self.ttft_count += 1
            self.ttft_sum += t
            for i, b in enumerate(TTFT_BUCKETS):
                if t <= b:
                    self.buckets[i] += 1
        self.live.ttfts.clear()

    def render(self) -> str:
        self._drain()
        sched = self.live.sched
        lab = f'model_name="{self.model}",engine="0"'
        lines: list[str] = []

        def one(name: str, kind: str, value: float, help_: str) -> None:
            lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name}{{{lab}}} {value}"])

        one("vllm:num_requests_running", "gauge", len(sched.running), "Number of requests in model execution batches.")
        one("vllm:num_requests_waiting", "gauge", len(sched.waiting), "Number of requests waiting to be processed.")
        one("vllm:kv_cache_usage_perc", "gauge", round(sched.kv_usage(), 6), "KV-cache usage. 1 means 100 percent usage.")
        one("vllm:num_preemptions_total", "counter", sched.preemptions, "Cumulative number of preemption from the engine.")
        one("vllm:prompt_tokens_total", "counter", self.prompt_tokens, "Number of prefill tokens processed.")
        one("vllm:generation_tokens_total", "counter", self.live.generation_tokens, "Number of generation tokens processed.")
        one("vllm:request_success_total", "counter", self.live.success, "Count of successfully processed requests.")
        name = "vllm:time_to_first_token_seconds"
        lines += [f"# HELP {name} Histogram of time to first token in seconds.", f"# TYPE {name} histogram"]
        for b, c in zip(TTFT_BUCKETS, self.buckets, strict=True):
            lines.append(f'{name}_bucket{{{lab},le="{b}"}} {c}')
        lines.append(f'{name}_bucket{{{lab},le="+Inf"}} {self.ttft_count}')
        lines.append(f"{name}_count{{{lab}}} {self.ttft_count}")
        lines.append(f"{name}_sum{{{lab}}} {self.ttft_sum}")
        if self.flavour == "sglang":
            one("sglang:num_running_reqs", "gauge", len(sched.running), "The number of running requests.")
            one("sglang:num_queue_reqs", "gauge", len(sched.waiting), "The number of requests in the waiting queue.")
            one("sglang:token_usage", "gauge", round(sched.kv_usage(), 6), "The token usage.")
        return "\n".join(lines) + "\n"
