"""The study file: strict pydantic models for everything a user writes (unknown keys are errors)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tuner.common.errors import SpecError
from tuner.common.metric_keys import natural_direction
from tuner.engines.registry import engine_class
from tuner.engines.registry import names as engine_names
from tuner.spec.sla import SLATerm, is_summary_key, parse_sla, renamed_hint
from tuner.spec.space_file import SearchSpaceRef
from tuner.spec.strict import Strict
from tuner.spec.workload import Workload

# Classes of knobs that can change a model's outputs; a study opts into each one (`allow:`).
OutputClass = Literal["fp8_weights", "fp8_kv_cache", "speculative_decoding"]
SpecMethodName = Literal["ngram", "ngram_gpu", "eagle3", "dflash", "mtp"]

class ModelSpec(Strict):
    name: str = Field(min_length=1)  # local path or hub id passed to the engine
    served_name: str | None = None  # name clients use; default: name
    shape: str | None = None  # simulator catalogue entry (e.g. qwen3-8b); default: guessed from name
    max_model_len: int = Field(default=8192, gt=0)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "bfloat16"
    tensor_parallel_size: int = Field(default=1, gt=0)
    tokenizer: str | None = None
    trust_remote_code: bool = False  # never on unless the study says so
    load_format: str | None = None  # e.g. "dummy": benchmark shapes without weights
    sha256_manifest: Path | None = None  # optional: verify model files before the study
    must_exist: bool = False  # name is a local path that must exist

    @property
    def client_name(self) -> str:
        return self.served_name or self.name


class HostFactors(Strict):
    """The user's host as `python -m tuner.sim.host` measured it (tuner/sim/host.py): x the calibrated prompt-step
    launch and x the calibrated fixed step time (vLLM flavour)."""

    launch: float = Field(default=1.0, ge=0.05, le=5.0)
    step: float = Field(default=1.0, ge=0.2, le=5.0)


class SimSettings(Strict):
    """The simulated engine: which real engine it imitates, on which GPU, in which face."""

    flavour: Literal["vllm", "sglang"] = "vllm"
    gpu: str = "H200"
    mode: Literal["virtual", "server"] = "virtual"
    time_scale: float = Field(default=1.0, ge=0.01, le=1000)  # server face: >1 runs faster than real time
    faults: dict[str, Any] = {}  # server face fault switches (tests)
    start_timeout_s: float = Field(default=120, ge=1)  # server face: readiness deadline
    stop_timeout_s: float = Field(default=30, ge=0.1)  # server face: SIGTERM -> SIGKILL grace
    # the user's host, measured (servetune host); None: as calibrated. Not `host`: a server's bind address is `host`
    host_factors: HostFactors | None = None


class EngineSettings(Strict):
    """How to run one real engine: its interpreter or command prefix, extra env and fixed args."""

    python: str | None = None  # interpreter of the engine's own environment
    command: list[str] | None = None  # full command prefix instead of `python -m ...`
    env: dict[str, str] = {}
    host: str = "127.0.0.1"
    start_timeout_s: float = Field(default=600, ge=1)  # no engine is ready in less than a second
    stop_timeout_s: float = Field(default=30, ge=0.1)
    check_args: bool = True  # validate against the engine's own parser when importable

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not v[0].strip() or any("\x00" in a for a in v)):
            raise ValueError("command needs the program first (a non-empty list of plain arguments) | fix: write "
                             "e.g. command: [/opt/venv/bin/python, -m, vllm.entrypoints.openai.api_server], or leave it out")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():  # what execve accepts: a name without '=' or NUL, a value without NUL
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name | fix: use letters, digits and _")
            if "\x00" in value:
                raise ValueError(f"the value of {name} holds a NUL byte | fix: give plain text")
        return v


class CapacitySettings(Strict):
    """Capacity search per trial: highest offered load whose SLA terms hold."""

    mode: Literal["rate", "concurrency"] = "rate"
    low: float = Field(default=0.5, gt=0)  # req/s (0.5) or concurrent streams (1) where the search starts
    high: float = Field(default=64, gt=0)  # cap on the offered load
    tolerance: float = Field(default=0.05, gt=0, lt=1)  # relative bisection tolerance
    max_points: int = Field(default=8, gt=0)
    requests_per_point: int = Field(default=400, gt=0)
    duration_s: float | None = Field(default=None, ge=1)  # alternative to requests_per_point
    request_timeout_s: float = Field(default=300, ge=1)  # an LLM request needs more than a second

    @model_validator(mode="before")
    @classmethod
    def _default_low(cls, data: Any) -> Any:
        """The default start is per mode: half a request per second, or one stream (half a stream is none)."""
        if isinstance(data, dict) and data.get("mode") == "concurrency" and "low" not in data:
            return {**data, "low": 1}
        return data

    @model_validator(mode="after")
    def _bounds(self) -> CapacitySettings:
        if self.low > self.high:
            raise ValueError(f"low <= high must hold, but got low={self.low:g} high={self.high:g}"
                             " | fix: lower capacity.low or raise capacity.high")
        if {"duration_s", "requests_per_point"} <= self.model_fields_set and self.duration_s is not None:
            raise ValueError(f"give one of requests_per_point ({self.requests_per_point}) or duration_s "
                             f"({self.duration_s:g}), not both: duration_s wins and requests_per_point would be "
                             "ignored | fix: keep the one you mean")
        if self.mode == "concurrency" and self.low < 1:
            raise ValueError(f"low is a number of concurrent streams, at least 1, got {self.low:g} | fix: give low >= 1")
        first = self.duration_s if self.duration_s is not None else self.requests_per_point / self.low
        if self.mode == "rate" and first > 86400:
            raise ValueError(f"the first load point alone would send for {first / 3600:.3g} h ({self.requests_per_point} "
                             f"requests at {self.low:g} req/s) | fix: raise capacity.low, or lower requests_per_point")
        return self


class SpecMethod(Strict):
    """One speculative-decoding method the study offers (see docs/search.md, "Levers")."""

    draft_model: str | None = None  # eagle3 / dflash: the draft's hub id or path (never sampled)
    acceptance_length: float | None = Field(default=None, ge=1.0)  # sim: mean tokens per verify step
    at_tokens: int | None = Field(default=None, ge=1)  # ... measured with this many draft tokens
    draft_layers: int | None = Field(default=None, ge=0)  # sim: the draft's depth (default per method)


class Speculative(Strict):
    """Which speculative-decoding methods exist for this model. ngram needs nothing and is always on
    offer once `speculative_decoding` is allowed; eagle3 and dflash need `draft_model`; mtp needs an
    entry (the target model carries its own MTP layers)."""

    methods: dict[SpecMethodName, SpecMethod] = {}

    @model_validator(mode="after")
    def _drafts(self) -> Speculative:
        for name in ("eagle3", "dflash"):
            m = self.methods.get(name)  # type: ignore[call-overload,unused-ignore]
            if m is not None and not m.draft_model:
                raise ValueError(f"speculative method {name} needs draft_model | fix: name the draft model "
                                 f"(e.g. a {name} draft trained for this target) or drop the entry")
        return self


class Objective(Strict):
    metric: str = "output_throughput"  # maximised at the SLA capacity
    per_gpu: bool = False  # divide the objective by the trial's GPU count (tensor x data parallel)
    mode: Literal["constrained", "multi"] = "constrained"  # multi: throughput vs p99 latency (Pareto)
    latency_metric: str = "p99_ttft_ms"  # second objective in multi mode and for the Pareto front
    # Optional, and only ever the metric's natural direction (latencies down, throughputs up): writing it
    # documents the intent, writing the opposite is refused rather than silently obeyed or ignored.
    direction: Literal["maximize", "minimize"] | None = None

    @field_validator("metric", "latency_metric")
    @classmethod
    def _known(cls, v: str) -> str:
        """A misspelt metric would run the whole study and rank every trial as None."""
        hint = renamed_hint(v)
        if hint is not None:
            raise ValueError(f"old metric name {v!r} | fix: {hint}")
        if not is_summary_key(v):
            raise ValueError(f"unknown metric {v!r} | fix: use a summary key such as output_throughput, "
                             "request_throughput, request_goodput or p99_ttft_ms (per class: class.<name>.<key>)")
        return v

    @model_validator(mode="after")
    def _natural_direction(self) -> Objective:
        """The objective is the highest-is-best figure at the SLA capacity; the latency metric the lowest-is-best."""
        natural = natural_direction(self.metric)
        if self.direction is not None and self.direction != natural:
            raise ValueError(f"objective.direction {self.direction!r} contradicts {self.metric!r}, which is "
                             f"{'a latency/error figure: lower is better' if natural == 'minimize' else 'a throughput: higher is better'}"
                             f" | fix: drop direction or write direction: {natural}")
        if natural == "minimize":
            raise ValueError(f"objective.metric {self.metric!r} is a latency/error figure (lower is better), but the "
                             "objective is the figure maximised at the SLA capacity | fix: limit it under sla "
                             f"(e.g. '{self.metric} <= 500') and keep a throughput objective, or use mode: multi with "
                             f"latency_metric: {self.metric}")
        if natural_direction(self.latency_metric) != "minimize":
            raise ValueError(f"objective.latency_metric {self.latency_metric!r} is a throughput (higher is better), "
                             "but it is minimised against the objective | fix: use a latency such as p99_ttft_ms")
        return self


class SimGateSettings(Strict):
    """Simulator in the loop (tuner.search.study_gate): each candidate of a real-engine study is scored on
    the calibrated simulator first and launched only if its prediction, corrected by the real trials so
    far and widened by the simulator's measured error, could beat the incumbent."""

    enabled: bool | None = None  # None: on for real engines the simulator can model, off for the sim engine
    prior_error: float = Field(default=0.3, gt=0)  # relative error assumed until min_points real trials met the SLA
    floor: float = Field(default=0.05, ge=0)  # never trust the simulator closer than this
    min_points: int = Field(default=3, ge=1)
    # fit the simulator's host factors (tuner.sim.host) on the first measured trial's per-request records, where
    # sim.host_factors is not given (vLLM flavour): the engine's CPU-side step times differ between hosts of one GPU
    fit_host: bool = True
    max_skips: int = Field(default=20, ge=1)  # candidates skipped in a row that end the search (nothing left to gain)
    # simulated trials of the study's own search whose configs the gate proposes, best upper bound first,
    # before the sampler's own samples (0: the gate only vetoes the sampler's samples)
    pool: int = Field(default=40, ge=0)


class SearchSettings(Strict):
    # tpe-coord (default): single-knob moves ranked by a model + multivariate TPE (tuner/search/coord.py,
    # coord_polish.py; benchmark in docs/search.md); tpe-local: TPE plus neighbour moves around the incumbent
    # (tuner/search/local_tpe.py); rf: random forest + expected improvement (tuner/search/rf_sampler.py)
    algorithm: Literal["tpe-local", "tpe-coord", "rf", "tpe", "nsga2", "random", "grid"] = "tpe-coord"
    baseline_first: bool = True
    n_startup_trials: int = Field(default=8, ge=0)
    prescreen: bool = False  # rank candidates on the simulator before real trials
    learn_failures: bool = True
    sim_gate: SimGateSettings = SimGateSettings()


class Budget(Strict):
    trials: int = Field(default=24, gt=0)
    time_limit_s: float | None = Field(default=None, ge=1)
    max_concurrent: int = Field(default=2, gt=0)


class Resources(Strict):
    gpus_per_trial: float = Field(default=0, ge=0)  # 0 = the engine's tensor parallel size on GPU engines
    cpus_per_trial: float = Field(default=1, ge=0.01)  # Ray counts in 1e-4; 0.01 is the least useful share
    # where trials run (tuner.run.executor): ray = Ray Tune trials; local = subprocesses on this host, no Ray
    executor: Literal["ray", "local"] = "ray"
    trial_timeout_s: float | None = Field(default=None, ge=1)  # local executor: a trial process past this is stopped

    @field_validator("gpus_per_trial")
    @classmethod
    def _gpus(cls, v: float) -> float:
        if 0 < v < 0.01:
            raise ValueError(f"gpus_per_trial {v:g} is below any usable share | fix: give 0 (the engine's tensor "
                             "parallel size), a share like 0.5, or whole GPUs")
        return v


class Tracking(Strict):
    mlflow_uri: str | None = None  # default: sqlite under the output folder
    experiment: str | None = Field(default=None, max_length=200)  # default: the study name
    # live: each trial logged to MLflow as it finishes; deferred: trials kept in the output folder and
    # logged at the end of the study, or later by `--log-only <output>` (a tracking server out of reach)
    mode: Literal["live", "deferred"] = "live"


class Canary(Strict):
    """A short load against the deployed app that re-checks the study's SLA before staging moves
    (`python -m tuner.promote --deploy`; docs/promote.md)."""

    enabled: bool = True
    seconds: float = Field(default=30, gt=0, le=3600)  # how long the canary sends
    load_fraction: float = Field(default=0.8, gt=0, le=1)  # of the confirmed SLA capacity


class Promotion(Strict):
    enabled: bool = True
    confirm_runs: int = Field(default=2, ge=0)
    top_k: int = Field(default=2, gt=0)
    app_name: str = Field(default="staging", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    route_prefix: str = "/"
    replicas: int = Field(default=1, gt=0)
    # When no tuned config beats the confirmed defaults by more than run-to-run noise: promote the
    # defaults (a known-good config to serve) or nothing.
    when_defaults_win: Literal["promote_defaults", "nothing"] = "promote_defaults"
    canary: Canary = Canary()

    @field_validator("route_prefix")
    @classmethod
    def _route(cls, v: str) -> str:
        """Ray Serve refuses a route prefix without a leading '/' only when the config is deployed."""
        if not v.startswith("/") or any(c.isspace() for c in v) or (len(v) > 1 and v.endswith("/")):
            raise ValueError(f"route_prefix must start with '/', have no spaces and no trailing '/', got {v!r}"
                             f" | fix: write e.g. route_prefix: /{v.strip().strip('/') or 'v1'}")
        return v


_RANK = {"p50": 50.0, "median": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9, "max": 100.0}


def _loose_sla(terms: list[SLATerm]) -> list[str]:
    """Terms that can never bind: a lower percentile's limit at or above a higher one's on the same latency
    (p50 <= p99 always, so `p50_ttft_ms <= 2000` beside `p99_ttft_ms <= 500` limits nothing: swapped limits?)."""
    out = []
    ranked = [(t, t.latency) for t in terms if t.latency is not None and t.latency[0] in _RANK]
    for low, (ls, lm) in ranked:
        for high, (hs, hm) in ranked:
            if lm == hm and _RANK[ls] < _RANK[hs] and low.limit >= high.limit:
                out.append(f"sla: '{low}' never binds: '{high}' already holds every {ls} lower ({ls} <= {hs}); "
                           "were the limits swapped?")
                break
    return out


class Study(Strict):
    # a folder name (runs/<name>) and an MLflow experiment name: 128 characters keep both valid everywhere
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seed: int = Field(default=0, ge=0, le=2**32 - 1)  # numpy and Optuna seeds are 32-bit unsigned
    engine: str | list[str]  # registered engine names (tuner.engines.registry)
    model: ModelSpec
    allow: list[OutputClass] = []  # output-changing knob classes this study may search (default: none)
    speculative: Speculative = Speculative()
    output_check: Literal["off", "required"] = "off"  # compare outputs with the baseline (real weights only)
    sim: SimSettings = SimSettings()
    engines: dict[str, EngineSettings] = {}  # run settings per real engine
    search_space: SearchSpaceRef | dict[str, SearchSpaceRef] = SearchSpaceRef()
    workload: Workload
    capacity: CapacitySettings = CapacitySettings()
    sla: list[SLATerm]
    objective: Objective = Objective()
    search: SearchSettings = SearchSettings()
    budget: Budget = Budget()
    resources: Resources = Resources()
    tracking: Tracking = Tracking()
    promotion: Promotion = Promotion()

    @field_validator("output_check", mode="before")
    @classmethod
    def _output_check(cls, v: Any) -> Any:
        """YAML 1.1 reads a bare `off` / `on` as false / true: take them as the words the user wrote."""
        return {False: "off", True: "required"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("sla", mode="before")
    @classmethod
    def _sla(cls, v: Any) -> list[SLATerm]:
        # SpecError (not ValueError) passes through pydantic with its own where/fix; validate() adds the file.
        if isinstance(v, list) and v and all(isinstance(t, SLATerm) for t in v):
            return v
        if not isinstance(v, (str, list)):
            raise SpecError(f"sla must be a list of terms, got {type(v).__name__}", "sla",
                            "write sla: [\"p99_ttft_ms <= 500\", ...]")
        for i, t in enumerate(v if isinstance(v, list) else []):
            if not isinstance(t, str):
                raise SpecError(f"an SLA term must be text like 'p99_ttft_ms <= 500', got {type(t).__name__} {t!r}",
                                f"sla[{i}]", "quote the term: \"p99_ttft_ms <= 500\"")
        terms = parse_sla(v)
        if not terms:
            raise SpecError("at least one SLA term is required", "sla", "add a term like 'p99_ttft_ms <= 500'")
        return terms

    @field_validator("search_space", mode="before")
    @classmethod
    def _space_blocks(cls, v: Any) -> Any:
        """Per-engine blocks (`search_space: {vllm: {...}}`) or one shared block, never both; a per-engine block
        that is not a mapping is named as such (both union branches failing read "unknown key 'vllm'")."""
        if not isinstance(v, dict):
            return v
        engines = [k for k in v if k in engine_names()]
        shared = [k for k in v if k in SearchSpaceRef.model_fields]
        if engines and shared:
            raise SpecError(f"search_space mixes per-engine blocks ({engines}) with shared keys ({shared})",
                            "search_space", f"move {shared} into each engine's block, or drop the engine blocks")
        for k in engines:
            if not isinstance(v[k], dict):
                raise SpecError(f"the {k} block must be a mapping (file, overrides, fixed, exclude, constraints), got "
                                f"{'null' if v[k] is None else type(v[k]).__name__}", f"search_space.{k}",
                                f"write search_space: {{{k}: {{overrides: ...}}}}, or leave the {k} block out")
        return v

    @field_validator("engine")
    @classmethod
    def _engines(cls, v: Any) -> Any:
        known = engine_names()
        if isinstance(v, list):
            if not v:
                raise SpecError("engine list must not be empty", "engine", f"name one engine: {', '.join(known)}")
            if len(set(v)) != len(v):
                raise SpecError(f"engine listed twice: {v}", "engine", "list each engine once")
        for name in v if isinstance(v, list) else [v]:
            if name not in known:
                raise SpecError(f"unknown engine {name!r}", "engine", f"use one of {known}")
        return v

    @field_validator("engines")
    @classmethod
    def _settings(cls, v: dict[str, EngineSettings]) -> dict[str, EngineSettings]:
        known = engine_names()
        real = [n for n in known if not engine_class(n).simulated]
        for name in v:
            if name not in known:
                raise SpecError(f"engines has settings for unknown engine {name!r}", f"engines.{name}",
                                f"key the blocks by engine: {real}")
            if name not in real:
                raise SpecError(f"the simulated engine {name!r} takes its settings under sim:, not engines:",
                                f"engines.{name}", "move them to the sim: block")
        return v

    def warnings(self) -> list[str]:
        """Valid but probably not meant (the study runs; the user is told)."""
        s, out = self.search, []
        if "n_startup_trials" in s.model_fields_set and s.algorithm in ("tpe-local", "tpe-coord", "rf", "tpe", "nsga2") \
                and s.n_startup_trials >= self.budget.trials:
            out.append(f"search.n_startup_trials {s.n_startup_trials} >= budget.trials {self.budget.trials}: every "
                       f"trial is a random start ({s.algorithm} never guides the search); set it below the trials")
        sim = self.sim
        if sim is not None and sim.mode == "server" and sim.time_scale > 5:
            out.append(f"sim.time_scale {sim.time_scale:g} on the server face: the HTTP path's own cost is multiplied "
                       "by it too, so latencies read high and SLA verdicts err on the miss side (docs/sim.md, The "
                       "server); use 1-5 where the SLA matters, or mode: virtual")
        return out + _loose_sla(self.sla)

    @property
    def engine_names(self) -> list[str]:
        return list(self.engine) if isinstance(self.engine, list) else [self.engine]

    def space_ref(self, engine: str) -> SearchSpaceRef:
        if isinstance(self.search_space, dict):
            return self.search_space.get(engine, SearchSpaceRef())
        return self.search_space
