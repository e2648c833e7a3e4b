"""User-facing workload models: named profiles, inline class mixes and trace replay.

Lengths are in tokens. The generator that turns these into `Request`s lives in tuner.load.workload.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from tuner.spec.strict import Strict

# No model reads more than this many tokens per request (the trace reader's bound too): a length beyond it
# is a unit slip (characters, bytes) or a spread with no cap, and would build a prompt that fills memory.
MAX_TOKENS = 10_000_000
_TOO_LONG = f"lengths are tokens, at most {MAX_TOKENS:,}"


class Fixed(Strict):
    dist: Literal["fixed"] = "fixed"
    value: int = Field(gt=0, le=MAX_TOKENS)


def _capped(kind: str, top: float, cap: int | None, spread: str) -> None:
    """A clipped distribution without `max` whose spread reaches past MAX_TOKENS: its samples overflow (a
    lognormal's exp() to infinity, then to a negative int64) or build prompts no model takes."""
    if cap is None and top > MAX_TOKENS:
        raise ValueError(f"a {kind} with this {spread} draws lengths above {MAX_TOKENS:,} tokens (about {top:.3g} "
                         f"at 6 sigma) | fix: give max (the longest length in tokens), or a smaller {spread}")


class Normal(Strict):
    """Normal, clipped to [min, max] (the seeds' ``320 +- 120``)."""

    dist: Literal["normal"]
    mean: float = Field(gt=0, le=MAX_TOKENS)
    std: float = Field(ge=0)
    min: int = Field(default=1, gt=0, le=MAX_TOKENS)
    max: int | None = Field(default=None, gt=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _bounds(self) -> Normal:
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min <= max must hold, but got min={self.min} max={self.max} | fix: lower min or raise max")
        _capped("normal", self.mean + 6 * self.std, self.max, "std")
        return self


class LogNormal(Strict):
    """Log-normal given by its median and the std of log(length)."""

    dist: Literal["lognormal"]
    median: float = Field(gt=0, le=MAX_TOKENS)
    sigma: float = Field(ge=0)
    min: int = Field(default=1, gt=0, le=MAX_TOKENS)
    max: int | None = Field(default=None, gt=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _spread(self) -> LogNormal:
        _capped("lognormal", self.median * math.exp(min(6 * self.sigma, 700.0)), self.max, "sigma")
        return self


class Uniform(Strict):
    dist: Literal["uniform"]
    low: int = Field(gt=0, le=MAX_TOKENS)
    high: int = Field(gt=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _bounds(self) -> Uniform:
        if self.low > self.high:
            raise ValueError(f"low <= high must hold, but got low={self.low} high={self.high} | fix: swap them")
        return self


class Empirical(Strict):
    """Sample from given values (optionally weighted)."""

    dist: Literal["empirical"]
    values: list[int] = Field(min_length=1)
    weights: list[float] | None = None

    @model_validator(mode="after")
    def _weights(self) -> Empirical:
        if self.weights is not None and len(self.weights) != len(self.values):
            raise ValueError("weights must have one entry per value")
        if any(v > MAX_TOKENS for v in self.values):
            raise ValueError(f"values: a length above {MAX_TOKENS:,} tokens | fix: {_TOO_LONG} (not characters or bytes)")
        return self


LengthDist = Annotated[Fixed | Normal | LogNormal | Uniform | Empirical, Field(discriminator="dist")]


class SharedPrefix(Strict):
    """Requests of this class share a prefix of `length` tokens, spread over `groups` distinct prefixes."""

    length: int = Field(ge=0)
    groups: int = Field(default=1, gt=0)


class RequestClass(Strict):
    """One kind of request. A length may be written as a plain number, short for ``{dist: fixed, value: N}``."""

    name: str = Field(min_length=1)
    weight: float = Field(gt=0)
    input: LengthDist
    output: LengthDist
    shared_prefix: SharedPrefix | None = None
    abnormal: bool = False  # counted separately in metrics (the seeds' > 16K requests)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        """Class names go into metric keys (class.<name>.p99_ttft_ms, split at the dot) and MLflow metric
        names (no newlines, quotes or most punctuation): a dot or such a character fails only mid-study."""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", v):
            raise ValueError(f"class name {v!r} is not a plain name | fix: use only letters, digits, '_' and '-' "
                             "(no dots or spaces): it becomes part of metric names like class.<name>.p99_ttft_ms")
        return v

    @field_validator("input", "output", mode="before")
    @classmethod
    def _plain_number(cls, v: Any) -> Any:
        return {"dist": "fixed", "value": v} if isinstance(v, int) and not isinstance(v, bool) else v


class Arrivals(Strict):
    """How requests arrive. The rate or concurrency itself comes from the load point (capacity search)."""

    process: Literal["poisson", "gamma", "constant", "concurrency"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)  # gamma shape; 1 = Poisson, < 1 burstier


class Trace(Strict):
    """Replay a trace: servetune's Parquet/JSONL of (arrival_s, input_len, output_len[, cls]), the Azure
    LLM inference trace CSV, or a Mooncake JSONL trace (tuner.load.trace_formats)."""

    path: Path
    format: Literal["auto", "servetune", "azure", "mooncake"] = "auto"  # auto: by suffix and first record
    time_scale: float = Field(default=1.0, ge=0.01, le=10000)  # >1 replays faster

    @field_validator("path")
    @classmethod
    def _home(cls, v: Path) -> Path:
        """`~/traces/x.jsonl` is the home folder's (as model.name and --study take it), not a folder named ~."""
        return v.expanduser()


class Dataset(Strict):
    """Requests drawn from a real dataset on disk (tuner.load.datasets): ShareGPT JSON/JSONL or Hugging
    Face `datasets` files (a save_to_disk folder, .parquet, .arrow, .jsonl); arrivals from `arrivals`."""

    path: Path
    prompt_field: str | None = None  # text columns, for rows without conversations/messages
    output_field: str | None = None
    tokenizer: str | None = None  # local tokenizer folder to count tokens; default one token per word
    min_len: int = Field(default=4, ge=1)  # vLLM's ShareGPT filter: shorter prompts or replies dropped
    output_len: int | None = Field(default=None, gt=0)  # fixed output length (vLLM's --sharegpt-output-len)

    @field_validator("path")
    @classmethod
    def _home(cls, v: Path) -> Path:
        """`~/data/sharegpt.json` is the home folder's, not a folder named ~."""
        return v.expanduser()

    @model_validator(mode="after")
    def _fields(self) -> Dataset:
        if self.output_field is not None and self.prompt_field is None:
            raise ValueError("output_field needs prompt_field | fix: name the prompt column too")
        return self


class Workload(Strict):
    """Exactly one of `profile`, `classes`, `trace` or `dataset`."""

    profile: Literal["static", "dynamic", "mixed"] | None = None
    classes: list[RequestClass] | None = None
    trace: Trace | None = None
    dataset: Dataset | None = None
    arrivals: Arrivals = Arrivals()
    warmup_requests: int = Field(default=8, ge=0, le=100_000)  # requests sent before measuring, per load point
    prompt: Literal["words", "token_ids", "tokenizer"] = "words"  # how exact prompt lengths are made

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        given = [k for k in ("profile", "classes", "trace", "dataset") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of profile, classes, trace or dataset (got {given or 'none'})"
                             " | fix: keep one of them")
        if self.classes is not None and not self.classes:
            raise ValueError("classes must not be empty")
        return self
