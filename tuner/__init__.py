"""servetune: find the best serving configuration of an LLM engine under a latency SLA.

`import tuner` stays light: engines (vllm, sglang, torch) load lazily by name.
"""

__version__ = "0.1.0"
