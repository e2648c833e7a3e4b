"""Writes the small sample files the dataset and trace tests read (run once; the outputs are committed).

Synthetic text in the published formats, not excerpts of the real datasets:
sharegpt_sample.json (ShareGPT), sharegpt_sample.jsonl, azure_trace_sample.csv (Azure LLM inference
trace columns), mooncake_trace_sample.jsonl (Mooncake trace keys).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
WORDS = ("how do I sort a list in python explain the difference between tcp and udp write a poem about the sea "
         "what is the capital of france summarise this article please translate to german give three examples "
         "the quick brown fox jumps over lazy dog because results depend on input size and memory").split()


def text(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(WORDS, n))


def main() -> None:
    rng = np.random.default_rng(7)
    convs = []
    for i in range(48):
        turns = [{"from": "human", "value": text(rng, int(rng.integers(8, 200)))},
                 {"from": "gpt", "value": text(rng, int(rng.integers(20, 400)))}]
        if i % 5 == 0:
            turns = [{"from": "system", "value": "be brief"}, *turns]
        if i % 7 == 0:
            turns += [{"from": "human", "value": text(rng, 30)}, {"from": "gpt", "value": text(rng, 60)}]
        convs.append({"id": f"s{i}", "conversations": turns})
    convs.append({"id": "lonely", "conversations": [{"from": "human", "value": text(rng, 20)}]})  # no reply: dropped
    convs.append({"id": "terse", "conversations": [{"from": "human", "value": text(rng, 20)},
                                                   {"from": "gpt", "value": "ok"}]})  # reply < 4 tokens: dropped
    (HERE / "sharegpt_sample.json").write_text(json.dumps(convs, indent=1) + "\n")
    with (HERE / "sharegpt_sample.jsonl").open("w") as f:
        for c in convs[:20]:
            f.write(json.dumps(c) + "\n")
    t = datetime(2023, 11, 16, 18, 15, 46, 680590)
    with (HERE / "azure_trace_sample.csv").open("w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for _ in range(60):
            t += timedelta(seconds=float(rng.exponential(0.25)))
            f.write(f"{t.strftime('%Y-%m-%d %H:%M:%S.%f')}0,{int(rng.integers(50, 1500))},{int(rng.integers(5, 300))}\n")
    with (HERE / "mooncake_trace_sample.jsonl").open("w") as f:
        ms = 0
        for _ in range(60):
            ms += int(rng.exponential(300))
            n_in = int(rng.integers(100, 3000))
            f.write(json.dumps({"timestamp": ms, "input_length": n_in, "output_length": int(rng.integers(5, 300)),
                                "hash_ids": list(range(int(rng.integers(0, 4)), -(-n_in // 512)))}) + "\n")


if __name__ == "__main__":
    main()
