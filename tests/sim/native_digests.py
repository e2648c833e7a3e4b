"""Digests of the records of many simulator cases, to compare the compiled build with pure Python.

    [SERVETUNE_SIM_PURE=1] python tests/sim/native_digests.py   # prints JSON: {"status": ..., "digests": {...}}

Run once each way in separate processes (tests/sim/test_native.py): the compiled modules may only be
used when they give the same bits. Cases: the golden ones (tests/sim/golden.py) under the fit they were
made with and under today's fit (prompt defer, ingress, async scheduling on), with the heat term, an MoE
shape, FP8, speculative decoding of each method, SGLang, data parallel, numpy fields, and every
point of benchmarks/sim_speed.py's workload.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sim.golden import CASES, _requests, digest, run_case
from tuner.load.workload import generate
from tuner.sim import SimulatedEngine, native, shape_for
from tuner.sim.calibration import FITTED
from tuner.spec.load import load_study

ROOT = Path(__file__).resolve().parents[2]
HEAT = dataclasses.replace(FITTED, heat_slowdown=0.15, heat_tau_s=1.5)
# (engine kwargs, workload of golden._requests, run kwargs) under the fitted calibration
EXTRA: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "moe": ({"shape": "qwen3-30b-a3b"}, dict(n=100, rate=10.0, inp=(200, 4000), out=(20, 500), seed=21), {}),
    "moe_eager": ({"shape": "qwen3-30b-a3b", "enforce_eager": True},
                  dict(n=60, rate=0.0, inp=(200, 3000), out=(20, 300), seed=22), {"concurrency": 16}),
    "fp8": ({"quantization": "fp8", "kv_cache_dtype": "fp8"},
            dict(n=100, rate=12.0, inp=(200, 5000), out=(20, 600), seed=23), {}),
    "spec_mtp": ({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}},
                 dict(n=80, rate=8.0, inp=(300, 3000), out=(50, 400), seed=24), {}),
    "spec_per_bs": ({"speculative_config": {"method": "eagle3", "num_speculative_tokens": 4, "model": "draft",
                                            "num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 32, 2],
                                                                                      [33, 1024, 0]]}},
                    dict(n=120, rate=0.0, inp=(300, 2000), out=(50, 300), seed=25), {"concurrency": 40}),
    "dp2": ({"data_parallel_size": 2}, dict(n=120, rate=16.0, inp=(300, 4000), out=(50, 500), seed=26), {}),
    "sglang_spec": ({"flavour": "sglang", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3},
                    dict(n=80, rate=8.0, inp=(300, 3000), out=(50, 400), seed=27), {}),
}


def _engine(eng_kw: dict[str, Any], cal: Any) -> SimulatedEngine:
    kw = dict(eng_kw)
    return SimulatedEngine(flavour=kw.pop("flavour", "vllm"), gpu="H200", shape=kw.pop("shape", "qwen3-8b"),
                           args=kw, max_model_len=16384, tensor_parallel_size=kw.pop("tp", 1), calibration=cal)


def compute() -> dict[str, str]:
    out = {f"golden/{name}": digest(run_case(name)) for name in CASES}
    for name, (eng_kw, load_kw, run_kw) in CASES.items():
        kw = {k: v for k, v in eng_kw.items() if k != "ingress_per_seq_s"}
        out[f"fitted/{name}"] = digest(_engine(kw, FITTED).run(_requests(**load_kw), **run_kw))
        if name in ("vllm_default_mix_r20", "vllm_kv_pressure", "sglang_default"):
            out[f"heat/{name}"] = digest(_engine(kw, HEAT).run(_requests(**load_kw), **run_kw))
    for name, (eng_kw, load_kw, run_kw) in EXTRA.items():
        out[f"extra/{name}"] = digest(_engine(eng_kw, FITTED).run(_requests(**load_kw), **run_kw))
    # API callers' numpy scalars and whole-second int arrivals: read alike by both builds (types too: the
    # digest has repr(id) etc.)
    reqs = [dataclasses.replace(r, id=np.int64(r.id), arrival_s=int(r.arrival_s), input_len=np.int64(r.input_len),
                                output_len=np.int32(r.output_len)) for r in _requests(60, 4.0, (200, 3000), (20, 300), 28)]
    out["extra/numpy_and_int_fields"] = digest(_engine({}, FITTED).run(reqs))
    study = load_study(ROOT / "studies" / "default.yaml")  # benchmarks/sim_speed.py's workload, one pass
    from benchmarks.sim_speed import CONFIGS, RATES
    mml = study.model.max_model_len
    shape = study.model.shape or shape_for(study.model.name)
    for c, args in enumerate(CONFIGS):
        eng = SimulatedEngine(flavour=study.sim.flavour, gpu=study.sim.gpu, shape=shape, args=args, max_model_len=mml)
        for rate in RATES:
            reqs = generate(study.workload, n=300, rate=rate, seed=study.seed, max_model_len=mml)
            out[f"sim_speed/{c}/{rate}"] = digest(eng.run(reqs))
    return out


if __name__ == "__main__":
    print(json.dumps({"status": native.status, "compiled": native.is_compiled(), "digests": compute()}))
