"""Real measurements the simulator is calibrated and checked against, and how to replay them.

Each point is one `vllm bench serve` result file (benchmarks/reference/<set>/...json) with the
engine arguments it ran with. `simulate` replays the same workload (fixed input/output lengths,
all-at-once or Poisson arrivals) through SimulatedEngine and computes the same five figures.
Two kinds of set: `h200-vllm-0.26.0*` (vLLM's own benchmark client, listed below; `-qwen3-14b`: a second
model shape, held out) and servetune's own H200 studies (`h200-servetune*`, listed by each set's points.json,
written by scripts/h200/to_reference.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from tuner.load.records import Request, RequestRecord
from tuner.sim.cost import Calibration
from tuner.sim.detailed import (
    QUANTILES,
    BenchRun,
    bench_requests,
    bench_run,
    has_detail,
    load_json,
    run_distribution,
)
from tuner.sim.engine import SimulatedEngine
from tuner.sim.knobs import resolve_args

if TYPE_CHECKING:
    from tuner.sim.sglang_cost import SGLangTerms
    from tuner.spec.study import Study

REF_ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "reference"
H200_VLLM_026 = "h200-vllm-0.26.0"
METRICS = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p50_itl_ms",
           "p99_itl_ms")


@dataclass(frozen=True)
class RefPoint:
    name: str
    file: str  # relative to the set's folder
    args: dict[str, Any] = field(default_factory=dict)
    rate: float = 0.0  # 0 = all requests at once
    prompts: int = 400
    input_len: int = 2048
    output_len: int = 512
    set_name: str = H200_VLLM_026
    max_model_len: int = 40960
    shape: str = "qwen3-8b"  # the model shape served (tuner.sim.catalog); all but Q14B_POINTS: Qwen3-8B

    def config_key(self) -> tuple[tuple[str, Any], ...]:
        """The engine configuration as the engine resolves it: explicit defaults equal omitted ones."""
        return tuple(sorted(resolve_args("vllm", "H200", self.shape, self.max_model_len, self.args).items()))


_SAT = "bench_{}.json"
H200_POINTS: tuple[RefPoint, ...] = (
    RefPoint("default", _SAT.format("default")),
    RefPoint("default_rerun", _SAT.format("default_rerun")),
    RefPoint("default_rate4", _SAT.format("default_rate4"), rate=4.0),
    RefPoint("eager", _SAT.format("eager"), {"enforce_eager": True}),
    RefPoint("gmu095", _SAT.format("gmu095"), {"gpu_memory_utilization": 0.95}),
    RefPoint("mns512_mbt16k", _SAT.format("mns512_mbt16k"), {"max_num_seqs": 512, "max_num_batched_tokens": 16384}),
    RefPoint("mns64", _SAT.format("mns64"), {"max_num_seqs": 64}),
    *(
        RefPoint(f"{cfg}_r{rate}", f"rates/bench_{cfg}_r{rate}.json", args, float(rate), 200)
        for cfg, args in (
            ("default", {}),
            ("mns64", {"max_num_seqs": 64}),
            ("mns128_mbt4k", {"max_num_seqs": 128, "max_num_batched_tokens": 4096}),
        )
        for rate in ("4", "6", "7.5")
    ),
)


# servetune's own load points on the H200 (--max-model-len 16384 on every server)
SERVETUNE_SETS = ("h200-servetune", "h200-servetune-30s")
CLIENT_SEED = 0  # `vllm bench serve --seed 0` and the servetune studies' `seed: 0`


def servetune_points(set_name: str, root: Path = REF_ROOT) -> tuple[RefPoint, ...]:
    index = json.loads((root / set_name / "points.json").read_text())
    return tuple(
        RefPoint(f"{set_name}/{p['name']}", p["file"], dict(p["args"]), float(p["rate"]), int(p["prompts"]),
                 int(p["input_len"]), int(p["output_len"]), set_name=set_name, max_model_len=16384)
        for p in index
    )


# A second model shape on the same H200 and vLLM (benchmarks/reference/h200-vllm-0.26.0-qwen3-14b, issue 17): a
# Qwen3-14B-shaped model, vLLM defaults (max_model_len 40960 from its config), the recipe's Poisson sweep with 150
# prompts per rate. Never fitted on (not in FIT_SET): the leave-one-shape-out check of benchmarks/sim_fidelity.py.
H200_Q14B = "h200-vllm-0.26.0-qwen3-14b"
Q14B_POINTS: tuple[RefPoint, ...] = tuple(
    RefPoint(f"q14b/default_r{r}", f"bench_q14b_default_r{r}.json", {}, float(r), 150, set_name=H200_Q14B,
             max_model_len=40960, shape="qwen3-14b")
    for r in ("3", "4.5", "6")
)

# Sets of `vllm bench serve --save-detailed` runs (per-request ttfts/itls, gzip), each described by a points.json
# (name, file, args, rate, prompts, lengths, shape, max_model_len; benchmarks/import_bench_set.py writes it). Never
# fitted on, replayed request by request: other model shapes (14B, 32B: split 'shape'), and Qwen3-8B at the default
# config with the same client (-qwen3-8b-vbench, issue 17's client/shape check: config and client in the fit's
# h200-vllm-0.26.0 points, rates 6/9/12 not: split 'rate').
DETAILED_SETS: tuple[str, ...] = tuple(
    s for s in ("h200-vllm-0.26.0-qwen3-14b-np400", "h200-vllm-0.26.0-qwen3-32b", "h200-vllm-0.26.0-qwen3-8b-vbench",
                "h200-vllm-0.26.0-qwen3-4b", "h200-vllm-0.26.0-qwen3-1.7b")
    if (REF_ROOT / s / "points.json").exists()
)


def bench_set_points(set_name: str, root: Path = REF_ROOT) -> tuple[RefPoint, ...]:
    """The points of a detailed set, named '<set's short name>/<point name>'."""
    short = set_name.removeprefix(H200_VLLM_026 + "-")
    return tuple(
        RefPoint(f"{short}/{p['name']}", p["file"], dict(p["args"]), float(p["rate"]), int(p["prompts"]),
                 int(p["input_len"]), int(p["output_len"]), set_name=set_name, max_model_len=int(p["max_model_len"]),
                 shape=p["shape"])
        for p in json.loads((root / set_name / "points.json").read_text())
    )


DETAILED_POINTS: tuple[RefPoint, ...] = tuple(pt for s in DETAILED_SETS for pt in bench_set_points(s))
ALL_POINTS: tuple[RefPoint, ...] = (H200_POINTS + tuple(pt for s in SERVETUNE_SETS for pt in servetune_points(s))
                                    + Q14B_POINTS + DETAILED_POINTS)

# FP8 KV cache and FP8 weights on the same H200 and vLLM (benchmarks/reference/h200-vllm-0.26.0-fp8): the
# 30 s Poisson points ("ss_") of issue 15's table, and the shorter 150-prompt points. Kept out of ALL_POINTS:
# the base calibration does not see them; benchmarks/calibrate_fp8.py fits the four FP8 factors on FP8_30S and FP8_CONC.
H200_FP8 = "h200-vllm-0.26.0-fp8"
_KV, _BOTH, _W = {"kv_cache_dtype": "fp8"}, {"kv_cache_dtype": "fp8", "quantization": "fp8"}, {"quantization": "fp8"}
FP8_30S: tuple[RefPoint, ...] = (
    *(RefPoint(f"fp8kv_r{r}", f"bench_ss_fp8kv_r{r}.json", _KV, float(r), 360, set_name=H200_FP8) for r in (12, 14)),
    *(RefPoint(f"fp8both_r{r}", f"bench_ss_fp8both_r{r}.json", _BOTH, float(r), 360, set_name=H200_FP8)
      for r in (12, 14)),
    *(RefPoint(f"fp8both_r{r}", f"bench_ss_fp8both_hi_r{r}.json", _BOTH, float(r), 480, set_name=H200_FP8)
      for r in (16, 18)),
)
FP8_TABLE = tuple(p for p in FP8_30S if p.rate in (12.0, 14.0))  # issue 15's check: 12 and 14 req/s
FP8_SHORT: tuple[RefPoint, ...] = tuple(
    RefPoint(f"{cfg}_r{r}_150", f"bench_{cfg}_r{r}.json", args, float(r), 150, set_name=H200_FP8)
    for cfg, args in (("default", {}), ("fp8kv", _KV), ("fp8w", _W), ("fp8both", _BOTH)) for r in (10, 12, 14)
)

# fitted on these (benchmarks/calibrate_sim.py); the others are held out (benchmarks/sim_fidelity.py).
# From servetune's studies: every point of the first (18 s points) and the defaults of the second
# (30 s points); its other three configs, and the dynamic-workload study, are held out.
FIT_SET = (
    "default", "eager", "mns64", "default_r4", "default_r7.5", "mns64_r7.5",
    *(p.name for p in ALL_POINTS if p.set_name == "h200-servetune"),
    *(p.name for p in ALL_POINTS if p.set_name == "h200-servetune-30s" and "/t0_default_" in p.name),
)


def client_of(p: RefPoint) -> str:
    """The load generator that measured a point: servetune's HttpTarget (token-id prompts) or `vllm bench serve`
    (text prompts the API server tokenizes)."""
    return "servetune" if p.set_name in SERVETUNE_SETS else "vllm-bench"


def split_of(p: RefPoint) -> str:
    """Why a point is held out: 'args' (its resolved engine config is in no fit point), 'rate' (fitted, never
    at this rate), 'client' (config and rate fitted, but only as measured by the other client), 'shape' (its model
    shape is in no fit point); or 'fit' / 'repeat' (same config, rate and client fitted, e.g. a re-run) when it is
    not."""
    if p.name in FIT_SET:
        return "fit"
    fitted = [q for q in ALL_POINTS if q.name in FIT_SET]
    if all(q.shape != p.shape for q in fitted):
        return "shape"
    same = [q for q in fitted if q.config_key() == p.config_key() and q.shape == p.shape]
    if not same:
        return "args"
    same_rate = [q for q in same if q.rate == p.rate]
    if not same_rate:
        return "rate"
    return "repeat" if any(client_of(q) == client_of(p) for q in same_rate) else "client"


def shape_calibration(shape: str) -> Calibration:
    """FITTED with the terms chosen with `shape` left out (tuner.sim.calibration.SHAPE_LOSO); FITTED itself
    for a shape that has no such entry (Qwen3-8B, fitted on)."""
    from tuner.sim.calibration import FITTED, SHAPE_LOSO

    terms = SHAPE_LOSO.get(shape)
    return FITTED if terms is None else replace(FITTED, **terms)  # type: ignore[arg-type]  # float fields only


def calibration_for(point: RefPoint) -> Calibration | None:
    """The calibration a point is checked with: for a shape-split point `shape_calibration` of its shape (never a fit
    that saw it); None (FITTED) otherwise."""
    return shape_calibration(point.shape) if split_of(point) == "shape" else None


def measured(point: RefPoint, root: Path = REF_ROOT) -> dict[str, float]:
    data = load_json(root / point.set_name / point.file)
    return {m: float(data[m]) for m in METRICS}


def detailed_run(point: RefPoint, root: Path = REF_ROOT) -> BenchRun | None:
    """The point's per-request arrays when its result file has them (`--save-detailed`), else None."""
    data = load_json(root / point.set_name / point.file)
    return bench_run(data) if has_detail(data) else None


def replay_detailed(point: RefPoint, run: BenchRun, cal: Calibration | None = None
                    ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(simulated, measured) TTFT/ITL quantiles, the simulator fed the run's measured lengths and send times (the
    client's start_times, or its reproduced draw where the file has none)."""
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=point.shape, args=point.args,
                          max_model_len=point.max_model_len, calibration=cal)
    return distribution(eng.run(bench_requests(run, client_arrivals(point)))), run_distribution(run)


def client_arrivals(point: RefPoint) -> np.ndarray:
    """The send times the point's client really drew (a Poisson run is one draw; its P99 TPOT and TTFT
    depend on that draw's bursts as much as on the engine).

    - `vllm bench serve --seed 0` (h200-vllm-0.26.0*): numpy's global RNG seeded with 0, one
      gamma(burstiness=1, 1/rate) gap per prompt, cumulated and rescaled so the last lands at n / rate
      (vllm/benchmarks/serve.py, get_request); the same draw at every rate and config.
    - servetune's load generator (h200-servetune*, study seed 0): tuner.load.workload.generate's arrival
      stream, checked against the per-request records' send times (within 29 ms, the client's lag).
    """
    n = point.prompts
    if point.set_name in SERVETUNE_SETS:
        from tuner.load.arrivals import arrival_times
        from tuner.spec.workload import Arrivals

        arr_seed = np.random.SeedSequence(CLIENT_SEED).spawn(4)[0]
        return arrival_times(Arrivals(process="poisson"), n, point.rate, np.random.default_rng(arr_seed))
    t = np.cumsum(np.random.RandomState(CLIENT_SEED).gamma(1.0, 1.0 / point.rate, n))
    return t * ((n / point.rate) / t[-1])


def workload(point: RefPoint, seed: int | None = None) -> list[Request]:
    """Fixed lengths, like vLLM's random dataset with range ratio 0; Poisson arrivals when rated: the client's
    own draw (`seed` None) or another draw of the same process (vllm bench's gap rule on numpy's default_rng)."""
    n = point.prompts
    if point.rate <= 0:
        t = np.zeros(n)
    elif seed is None:
        t = client_arrivals(point)
    else:
        rng = np.random.default_rng(seed)
        t = np.cumsum(rng.exponential(1.0 / point.rate, n))
        t *= (n / point.rate) / t[-1]
    return [Request(i, float(t[i]), point.input_len, point.output_len) for i in range(n)]


def figures(records: list[RequestRecord]) -> dict[str, float]:
    """The figures `vllm bench serve` reports, from simulated records."""
    ok = [r for r in records if r.ok]
    if not ok:
        return dict.fromkeys(METRICS, float("nan"))
    ttft = np.array([r.ttft_s for r in ok]) * 1e3
    tpot = np.array([r.tpot_s for r in ok if r.tpot_s is not None]) * 1e3
    # like `vllm bench serve`: every gap between streamed chunks of every request, pooled
    itl = np.concatenate([np.diff(r.token_times) for r in ok]) * 1e3
    start = min(r.sent_s for r in records)
    dur = max(r.done_s for r in ok if r.done_s is not None) - start
    return {
        "output_throughput": sum(r.output_tokens for r in ok) / dur,
        "p50_ttft_ms": float(np.percentile(ttft, 50)),
        "p99_ttft_ms": float(np.percentile(ttft, 99)),
        "p50_tpot_ms": float(np.percentile(tpot, 50)),
        "p99_tpot_ms": float(np.percentile(tpot, 99)),
        "p50_itl_ms": float(np.percentile(itl, 50)),
        "p99_itl_ms": float(np.percentile(itl, 99)),
    }


def simulate(point: RefPoint, cal: Calibration | None = None, seeds: tuple[int, ...] | None = None,
             gpu: str = "H200") -> dict[str, float]:
    """Simulated figures for the arrival draw the measurement used; with `seeds`, the median over those other
    draws of the same Poisson process instead (what the fidelity figures used before: draw noise included)."""
    eng = SimulatedEngine(flavour="vllm", gpu=gpu, shape=point.shape, args=point.args, max_model_len=point.max_model_len,
                          calibration=cal)
    draws: tuple[int | None, ...] = (None,) if seeds is None or point.rate <= 0 else seeds
    runs = [figures(eng.run(workload(point, s))) for s in draws]
    return {m: float(np.median([r[m] for r in runs])) for m in METRICS}


def errors_pct(sim: dict[str, float], real: dict[str, float]) -> dict[str, float]:
    return {m: abs(sim[m] - real[m]) / real[m] * 100.0 for m in METRICS}


# ---- per-request replays: servetune's own H200 records, every request's send time and token times --------
RESULTS_ROOT = REF_ROOT.parent / "results" / "h200"
_X2 = "raw-20261129-x2/h200-static-high/trials.tar.gz"
# the reference point each per-request record set measured -> (file under RESULTS_ROOT, member when a tar.gz);
# the raw trials' last load point is the point in benchmarks/reference (tests/sim/test_fidelity_terms.py)
RECORDS: dict[str, tuple[str, str]] = {
    "h200-servetune/t0_default_r12": ("h200-static/requests_baseline.parquet", ""),
    "h200-servetune-30s/t0_default_r10": ("h200-static-high/requests_baseline.parquet", ""),
    "h200-servetune/t1_max_num_batched_tokens4096_max_num_seqs256_r12":
        ("raw-20261129/trials.tar.gz", "trials/001-t001/requests.parquet"),
    "h200-servetune/t2_max_num_batched_tokens2048_max_num_seqs256_r12":
        ("raw-20261129/trials.tar.gz", "trials/002-t002/requests.parquet"),
    "h200-servetune-30s/t1_max_num_batched_tokens2048_max_num_seqs256_r10": (_X2, "trials/001-t001/requests.parquet"),
    "h200-servetune-30s/t2_max_num_batched_tokens16384_max_num_seqs128_r8": (_X2, "trials/002-t002/requests.parquet"),
    "h200-servetune-30s/t3_max_num_batched_tokens4096_max_num_seqs1024_r10": (_X2, "trials/003-t003/requests.parquet"),
}
REPLAYS = tuple(name for name in RECORDS if name in FIT_SET)  # fitted on; the others are held out


def replay_requests(name: str, root: Path = RESULTS_ROOT) -> tuple[list[Request], list[RequestRecord]]:
    """The measured (non-warm-up) requests of a point's records, re-based to send time 0, and their records."""
    import tarfile

    from tuner.common.atomic import read_table, read_table_bytes
    from tuner.load.records_io import to_records  # pyarrow: only where replays are used

    file, member = RECORDS[name]
    if member:
        with tarfile.open(root / file) as tar:
            f = tar.extractfile(member)
            assert f is not None, f"{member} in {file}"
            table = read_table_bytes(f.read())
    else:
        table = read_table(root / file)
    recs = sorted((r for r in to_records(table) if not r.warmup),
                  key=lambda r: r.sent_s)
    t0 = recs[0].sent_s
    reqs = [Request(i, r.sent_s - t0, r.input_len, r.output_len) for i, r in enumerate(recs)]
    return reqs, recs


def distribution(records: list[RequestRecord]) -> dict[str, list[float]]:
    """TTFT and ITL quantiles (ms) of a run: the shape of the distribution, not only its P99."""
    ok = [r for r in records if r.ok]
    ttft = np.array([r.ttft_s for r in ok]) * 1e3
    itl = np.concatenate([np.diff(r.token_times) for r in ok]) * 1e3
    return {"ttft": np.percentile(ttft, QUANTILES).tolist(), "itl": np.percentile(itl, QUANTILES).tolist()}


def replay(name: str, cal: Calibration | None = None) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(simulated, measured) distributions, the simulator fed the exact measured send times and lengths."""
    point = next(p for p in ALL_POINTS if p.name == name)
    reqs, real = replay_requests(name)
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=point.shape, args=point.args,
                          max_model_len=point.max_model_len, calibration=cal)
    return distribution(eng.run(reqs)), distribution(real)


# ---- load points of servetune studies' results folders (trials.parquet), simulated with the study's own workload --
REPO = REF_ROOT.parents[1]
FIGURES = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")


@dataclass(frozen=True)
class StudyPoint:
    """One measured load point of a study run on the H200 (open loop: req/s; closed loop: concurrency)."""

    results: str  # results folder under the repo, holding trials.parquet
    study: str  # the study file it ran (under the repo)
    trial: int
    load: float
    args: tuple[tuple[str, Any], ...]
    real: tuple[tuple[str, float], ...]  # the measured FIGURES
    engine: str = "vllm"  # the trial's own engine (a joint study, `engine: [vllm, sglang]`, runs both)

    @property
    def name(self) -> str:
        cfg = ",".join(f"{_ABBREV.get(k, k)}={v}" for k, v in self.args) or "defaults"
        return f"{Path(self.results).name}/t{self.trial} {cfg} @{self.load:g}"


_ABBREV = {"max_num_batched_tokens": "mbt", "max_num_seqs": "mns", "kv_cache_dtype": "kv", "quantization": "q",
           "attention_backend": "attn"}


def study_points(results: str, study: str = "") -> list[StudyPoint]:
    """The load points a study measured to the end (points stopped early are partial: left out; a trial stopped
    after some points keeps those it finished); `study` defaults to the study.yaml kept in the results folder.
    Each point keeps its trial's engine and args, over the study's fixed args for that engine."""
    from tuner.common.atomic import read_table  # the rows read raw: tuner.trial sits above the simulator
    from tuner.common.metric_keys import renamed
    from tuner.spec.load import load_study

    study = study or f"{results}/study.yaml"
    spec = load_study(REPO / study)
    engines = spec.engine_names
    file = REPO / results / "trials.parquet"
    table = read_table(file)
    cols = ["number", "args_json", "points_json"] + (["engine"] if "engine" in table.column_names else [])
    out = []
    for row in table.select(cols).to_pylist():
        engine = row.get("engine") or engines[0]
        assert engine in engines, f"{results} trial {row['number']}: engine {engine!r} not in the study's {engines}"
        args = {**spec.space_ref(engine).fixed, **json.loads(row["args_json"])}
        for raw in json.loads(row["points_json"]):
            pt = {renamed(k) or k: v for k, v in raw.items()}
            if pt.get("stopped_early") or any(pt.get(f) is None for f in FIGURES):
                continue
            out.append(StudyPoint(results, study, int(row["number"]), float(pt["load"]), tuple(sorted(args.items())),
                                  tuple((f, float(pt[f])) for f in FIGURES), engine))
    return out


def study_engine(sp: StudyPoint, cal: Calibration | None = None, study: Study | None = None,
                 sglang_terms: SGLangTerms | Literal["card"] | None = "card") -> SimulatedEngine:
    """The simulated engine of a study point: the trial's own engine (not the study's: a joint study has two);
    `study`: the point's study when the caller has loaded it already; `sglang_terms` as SimulatedEngine's."""
    from tuner.spec.load import load_study

    if study is None:
        study = load_study(REPO / sp.study)
    assert sp.engine in study.engine_names, f"{sp.name}: engine {sp.engine!r} not in {study.engine_names}"
    return SimulatedEngine(flavour=sp.engine, gpu="H200", shape=study.model.shape or "qwen3-8b", args=dict(sp.args),
                           max_model_len=study.model.max_model_len, dtype=study.model.dtype, calibration=cal,
                           sglang_terms=sglang_terms)


def simulate_study_point(sp: StudyPoint, cal: Calibration | None = None,
                         sglang_terms: SGLangTerms | Literal["card"] | None = "card") -> dict[str, float]:
    """The study's own workload at that load (same seed, duration, warm-ups) through the simulator."""
    from tuner.load.capacity import measure_point
    from tuner.load.target import VirtualTarget
    from tuner.spec.load import load_study

    study = load_study(REPO / sp.study)
    point, _ = measure_point(VirtualTarget(study_engine(sp, cal, study, sglang_terms)), study.workload, study.sla, study.capacity, sp.load,
                             seed=study.seed, max_model_len=study.model.max_model_len, base_dir=REPO)
    return {f: float(point.summary[f]) for f in FIGURES}


# Other H200 runs kept in results folders (issue 16): other workloads, FP8, SGLang. Fitted on: the dynamic-mix
# study h200-dynamic (benchmarks/calibrate_sim.py: its prompts of 300-6,000+ tokens are what sets the prefill
# attention efficiency e_attn, which 2048-token prompts barely see) and the FP8 weights + KV closed-loop trial
# (benchmarks/calibrate_fp8.py: the FP8 gains); every other point is held out. h200-joint-dynamic (round 5,
# `engine: [vllm, sglang]`, 20 s points at 6/9/12/16 req/s): vLLM defaults and FP8 weights + KV, SGLang 0.5.17
# defaults (triton attention) and FP8; SGLang's FP8 trial was rung-stopped after 2 whole points (both kept).
FIT_STUDY = ("benchmarks/results/h200/h200-dynamic", "studies/h200-dynamic.yaml")
JOINT_STUDY = ("benchmarks/results/h200/h200-joint-dynamic", "")
STUDY_SETS = (
    FIT_STUDY,
    ("benchmarks/results/h200/h200-fp8-dynamic", ""),
    ("benchmarks/results/h200-fp8-static-conc", ""),
    ("benchmarks/results/h200/h200-sglang-dynamic", ""),
    JOINT_STUDY,
)
FP8_BOTH = (("kv_cache_dtype", "fp8"), ("quantization", "fp8"))


def study_group(sp: StudyPoint) -> str:
    """What a study point checks: 'sglang' / 'sglang-fp8' (SGLang, never fitted; its FP8 gains are vLLM's),
    'fp8' (vLLM's FP8 gains), 'bf16-dynamic' (vLLM on the mixed workload) or 'bf16-closed' (vLLM, fixed
    concurrency); with '/fit' where a calibration fitted on it."""
    args = dict(sp.args)
    fp8 = any(str(args.get(k, "")).startswith("fp8") for k in ("quantization", "kv_cache_dtype"))
    if sp.engine == "sglang":
        return "sglang-fp8" if fp8 else "sglang"
    if fp8:
        return "fp8/fit" if "static-conc" in sp.results and sp.args == FP8_BOTH else "fp8"
    if sp.results == FIT_STUDY[0]:
        return "bf16-dynamic/fit"
    return "bf16-closed" if "conc" in sp.results else "bf16-dynamic"
