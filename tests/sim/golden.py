"""Fixed simulator cases and a digest of every record they produce, to prove a speed-up changes nothing.

`tests/sim/golden_records.json` holds the digests computed from the simulator before its speed work;
`python tests/sim/golden.py --write` recomputes them (only when a change is *meant* to move records,
e.g. a new cost term, and say so in the commit); `--add` adds the digests of new cases only. The cases
run with GOLDEN_CAL, not the current fit, so a refit leaves them alone (and SGLang cases without SGLang's
fitted terms, tuner/sim/sglang_cost.py, for the same reason).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tuner.load.records import Request, RequestRecord
from tuner.sim import SimulatedEngine
from tuner.sim.cost import Calibration

GOLDEN = Path(__file__).with_name("golden_records.json")
# the fit these digests were computed with (a refit must not break them: they check the code, not the fit)
GOLDEN_CAL = Calibration(e_lin=0.6, e_w=0.730297, e_attn=0.666667, e_kv=0.8, o_step_s=0.000666664,
                         o_tok_s=1.22474e-08, launch_per_layer_s=9.52361e-05, eager_mult=1.03478,
                         frontend_s=0.0199578, allreduce_lat_s=8e-06, e_link=0.7)


def _requests(n: int, rate: float, inp: tuple[int, int], out: tuple[int, int], seed: int,
              groups: int = 0, plen: int = 0) -> list[Request]:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate, n)) if rate > 0 else np.zeros(n)
    i_len = rng.integers(inp[0], inp[1] + 1, n)
    o_len = rng.integers(out[0], out[1] + 1, n)
    g = rng.integers(0, groups, n) if groups else np.full(n, -1)
    return [Request(k, float(t[k]), int(i_len[k]), int(o_len[k]), prefix_group=int(g[k]),
                    prefix_len=plen if groups else 0) for k in range(n)]


# name -> (engine kwargs, workload kwargs, run kwargs); small enough to run in a few seconds in all
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "vllm_default_r8": ({}, dict(n=150, rate=8.0, inp=(2048, 2048), out=(512, 512), seed=0), {}),
    "vllm_default_mix_r20": ({}, dict(n=200, rate=20.0, inp=(100, 6000), out=(20, 800), seed=1), {}),
    "vllm_mns64_sat": ({"max_num_seqs": 64}, dict(n=150, rate=0.0, inp=(1500, 2500), out=(200, 600), seed=2), {}),
    "vllm_mbt512_thr": ({"max_num_batched_tokens": 512, "max_num_seqs": 256, "long_prefill_token_threshold": 256,
                         "max_num_partial_prefills": 2}, dict(n=80, rate=6.0, inp=(300, 3000), out=(50, 300), seed=3), {}),
    "vllm_prefix": ({}, dict(n=120, rate=10.0, inp=(1000, 3000), out=(50, 200), seed=4, groups=5, plen=800), {}),
    "vllm_kv_pressure": ({"gpu_memory_utilization": 0.3, "max_num_seqs": 512},
                         dict(n=200, rate=0.0, inp=(3000, 6000), out=(500, 1500), seed=5), {}),
    "vllm_eager_closed": ({"enforce_eager": True}, dict(n=60, rate=0.0, inp=(500, 1500), out=(100, 300), seed=6),
                          {"concurrency": 8}),
    "vllm_timeout_toolong": ({}, dict(n=60, rate=5.0, inp=(1000, 20000), out=(100, 400), seed=7),
                             {"max_sim_time_s": 10.0}),
    "vllm_no_chunk": ({"enable_chunked_prefill": False, "max_num_batched_tokens": 16384},
                      dict(n=60, rate=6.0, inp=(500, 6000), out=(50, 300), seed=8), {}),
    "sglang_default": ({"flavour": "sglang"}, dict(n=150, rate=10.0, inp=(100, 6000), out=(20, 600), seed=9), {}),
    "sglang_lpm_prefix": ({"flavour": "sglang", "schedule_policy": "lpm"},
                          dict(n=100, rate=12.0, inp=(1000, 3000), out=(50, 200), seed=10, groups=4, plen=900), {}),
    "sglang_lof_pressure": ({"flavour": "sglang", "schedule_policy": "lof", "mem_fraction_static": 0.45},
                            dict(n=150, rate=0.0, inp=(3000, 6000), out=(500, 1500), seed=11), {}),
    "sglang_random_closed": ({"flavour": "sglang", "schedule_policy": "random", "chunked_prefill_size": 1024},
                             dict(n=60, rate=0.0, inp=(500, 3000), out=(100, 300), seed=12), {"concurrency": 16}),
    "vllm_tp2_70b": ({"tp": 2, "shape": "llama-3.1-70b"}, dict(n=60, rate=2.0, inp=(500, 3000), out=(100, 300), seed=13), {}),
    # added with the API-server ingress term (digest from the code that introduced it)
    "vllm_ingress": ({"ingress_per_seq_s": 4e-4}, dict(n=150, rate=12.0, inp=(1000, 3000), out=(100, 500), seed=14),
                     {}),
    "vllm_ingress_closed": ({"ingress_per_seq_s": 4e-4}, dict(n=60, rate=0.0, inp=(500, 1500), out=(50, 200), seed=15),
                            {"concurrency": 12, "max_sim_time_s": 8.0}),
    # fixed-K speculative decoding (digests from the code before the per-batch-size K schedule)
    "vllm_spec_eagle3_k3": ({"speculative_config": {"method": "eagle3", "num_speculative_tokens": 3,
                                                    "model": "draft"}},
                            dict(n=100, rate=8.0, inp=(500, 3000), out=(100, 400), seed=16), {}),
    "vllm_spec_dflash_k7_closed": ({"speculative_config": {"method": "dflash", "num_speculative_tokens": 7,
                                                           "model": "draft"}, "max_num_seqs": 64},
                                   dict(n=80, rate=0.0, inp=(500, 1500), out=(100, 300), seed=17),
                                   {"concurrency": 24}),
    "vllm_spec_ngram_k4": ({"speculative_config": {"method": "ngram", "num_speculative_tokens": 4,
                                                   "prompt_lookup_max": 4}},
                           dict(n=100, rate=10.0, inp=(500, 3000), out=(50, 300), seed=18), {}),
}


def digest(records: list[RequestRecord]) -> str:
    """sha256 over every field of every record, floats by their exact bits."""
    h = hashlib.sha256()
    for r in records:
        h.update(repr((r.id, r.cls, r.input_len, r.output_len, r.output_tokens, r.error, r.preemptions,
                       r.warmup)).encode())
        for x in (r.sent_s, r.first_token_s, r.done_s):
            h.update(b"N" if x is None else struct.pack("<d", x))
        h.update(struct.pack(f"<{len(r.token_times)}d", *r.token_times))
    return h.hexdigest()


def run_case(name: str) -> list[RequestRecord]:
    eng_kw, load_kw, run_kw = CASES[name]
    eng_kw = dict(eng_kw)
    flavour = eng_kw.pop("flavour", "vllm")
    tp = eng_kw.pop("tp", 1)
    shape = eng_kw.pop("shape", "qwen3-8b")
    cal = dataclasses.replace(GOLDEN_CAL, ingress_per_seq_s=eng_kw.pop("ingress_per_seq_s", 0.0))
    eng = SimulatedEngine(flavour=flavour, gpu="H200", shape=shape, args=eng_kw, max_model_len=16384,
                          tensor_parallel_size=tp, calibration=cal, sglang_terms=None)
    return eng.run(_requests(**load_kw), **run_kw)


def compute() -> dict[str, str]:
    return {name: digest(run_case(name)) for name in CASES}


if __name__ == "__main__":
    got = compute()
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN}")
    else:
        want = json.loads(GOLDEN.read_text())
        bad = [k for k in CASES if want.get(k) != got[k]]
        if "--add" in sys.argv:  # digests of new cases only; existing ones are never rewritten this way
            GOLDEN.write_text(json.dumps({**got, **want}, indent=1, sort_keys=True) + "\n")
        print("identical" if not bad else f"differ: {bad}")
