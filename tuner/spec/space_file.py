"""Search-space files (search_spaces/<engine>.yaml): parameters with ranges, defaults and constraints.

Parameter names are the engine's own argument names in snake_case (``max_num_seqs`` becomes
``--max-num-seqs``). `default` is what the engine uses when the flag is absent: trial 0 (the
baseline) runs all defaults. Constraints are structured, never evaluated as code.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from tuner.spec.strict import Strict

Scalar = int | float | str | bool
OutputClass = Literal["fp8_weights", "fp8_kv_cache", "speculative_decoding"]
SpecMethodName = Literal["ngram", "ngram_gpu", "eagle3", "dflash", "mtp"]  # study.speculative.methods keys
# An engine argument (snake_case), or a field of a structured one (speculative_config.method): the --flag is
# made from it, so a name like "x --trust-remote-code" would smuggle a flag into the engine's argv.
ARG_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


class Param(Strict):
    type: Literal["int", "float", "categorical", "bool"]
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: list[Scalar] | None = None
    default: Scalar | None = None  # the engine's own default (None: the engine decides; omit the flag)
    when: dict[str, Scalar | list[Scalar]] | None = None  # active only if these params have these values
    help: str = ""
    # Levers (docs/search.md): a param that can change outputs is searched only when the study allows its
    # class; a choice that needs a study-named method (a draft model) is offered only when the study names
    # it (choice -> method in study.speculative.methods), and that method's draft model goes into draft_arg.
    output_class: OutputClass | None = None
    choice_needs: dict[str, SpecMethodName] = {}
    draft_arg: str | None = None
    # Expected to move throughput by well under 1 % on most workloads (docs/search.md): the model-guided
    # search (`tpe-coord`) moves it only after the others; TPE and random draws sample it as any knob.
    minor: bool = False

    @model_validator(mode="after")
    def _check(self) -> Param:
        if self.type in ("int", "float"):
            if self.low is None or self.high is None:
                raise ValueError(f"{self.type} parameter needs low and high")
            if self.low > self.high:
                raise ValueError(f"low <= high must hold, but got low={self.low:g} high={self.high:g}"
                                 " | fix: swap them or narrow only one end")
            if self.log and self.low <= 0:
                raise ValueError(f"log scale needs low > 0, got low={self.low:g} | fix: give low >= 1 or set log: false")
            if self.log and self.step is not None:
                raise ValueError("log scale and step cannot both be set | fix: give a step with log: false, or a log "
                                 "scale without a step")
            if self.step is not None and self.step <= 0:
                raise ValueError(f"step must be > 0, got {self.step:g} | fix: give a positive step, or leave it out")
            if self.step is not None and self.high > self.low and self.step > self.high - self.low:
                raise ValueError(f"step {self.step:g} is larger than the range {self.low:g}..{self.high:g}, so only "
                                 f"low={self.low:g} would ever be tried | fix: give a step of at most "
                                 f"{self.high - self.low:g}, or widen the range")
            if self.type == "int" and any(v is not None and v != int(v) for v in (self.low, self.high, self.step)):
                raise ValueError(f"an int parameter needs whole numbers for low, high and step, got low={self.low:g} "
                                 f"high={self.high:g}" + (f" step={self.step:g}" if self.step is not None else "")
                                 + " | fix: round them, or make the parameter type: float")
            if self.default is not None and not _number_like(self.default, self.type):
                raise ValueError(f"default {self.default!r} is not {'a whole number' if self.type == 'int' else 'a number'}"
                                 f" | fix: give the engine's own default as a number, or null when the engine decides")
        elif self.type == "categorical":
            if not self.choices:
                raise ValueError("categorical parameter needs a non-empty choices list | fix: list at least one "
                                 "value under choices, or exclude the parameter")
            seen = [(type(c) is bool, c) for c in self.choices]  # true is not 1 here
            twice = next((c for i, c in enumerate(self.choices) if seen[i] in seen[:i]), None)
            if twice is not None:
                raise ValueError(f"choice {twice!r} listed twice (it would be drawn twice as often) | fix: list "
                                 "each choice once")
        if self.type in ("categorical", "bool") and (self.low, self.high, self.step) != (None, None, None):
            raise ValueError(f"low, high and step only apply to int and float parameters, not {self.type}"
                             " | fix: narrow it with choices")
        if self.type == "bool" and self.default is not None and not isinstance(self.default, bool):
            raise ValueError(f"default {self.default!r} of a bool parameter is not true or false | fix: give true, "
                             "false, or null when the engine decides")
        if self.type != "categorical" and self.choices is not None:
            raise ValueError(f"choices only apply to categorical parameters, not {self.type}")
        if self.draft_arg is not None and not ARG_NAME.match(self.draft_arg):
            raise ValueError(f"draft_arg {self.draft_arg!r} is not an engine argument name | fix: write a snake_case "
                             "name like speculative_config.model (servetune makes the --flag from it)")
        unknown = [c for c in self.choice_needs if c not in (self.choices or [])]
        if unknown:
            raise ValueError(f"choice_needs names choices {unknown} that are not in choices")
        return self


def _number_like(v: Scalar, kind: str) -> bool:
    """An int parameter's value is a whole number, a float's a finite number (true/false is neither)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v in (float("inf"), float("-inf")):
        return False
    return kind != "int" or v == int(v)


_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"  # dotted: a field of a structured arg
_OPERAND = rf"({_NAME}|-?[0-9]*\.?[0-9]+)"
_SIDE = rf"({_OPERAND}(?:\s*\*\s*{_OPERAND})?)"  # a name, a number, or a product of two
_REQUIRE = re.compile(rf"^\s*{_SIDE}\s*(<=|>=|<|>|==|!=)\s*{_SIDE}\s*$")


class Constraint(Strict):
    """``require: "a <= b"`` between parameters, ``max_model_len`` or numbers, optionally under ``if``.

    Either side may be a product ``a * b`` (e.g. ``max_num_seqs * decode_width``, where ``decode_width``
    is 1 + the speculative tokens per step). action ``repair`` moves the left-hand parameter to the
    nearest valid value; ``reject`` skips the config.
    """

    require: str
    when: dict[str, Scalar] | None = Field(default=None, alias="if")
    action: Literal["repair", "reject"] = "reject"
    why: str = ""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _parse(self) -> Constraint:
        if not _REQUIRE.match(self.require):
            raise ValueError(
                f"cannot parse constraint {self.require!r} | fix: write 'a <= b' with parameter names or numbers"
            )
        return self

    def parts(self) -> tuple[str, str, str]:
        m = _REQUIRE.match(self.require)
        assert m is not None
        return _squash(m.group(1)), m.group(4), _squash(m.group(5))


def _squash(side: str) -> str:
    """``a  *  b`` -> ``a*b`` (one spelling for products)."""
    return "*".join(t.strip() for t in side.split("*"))


class SearchSpaceFile(Strict):
    engine: str
    params: dict[str, Param]
    constraints: list[Constraint] = []

    @model_validator(mode="after")
    def _names(self) -> SearchSpaceFile:
        """Parameter names become engine flags: only snake_case names (dotted for a structured argument's field)."""
        bad = next((n for n in self.params if not ARG_NAME.match(n)), None)
        if bad is not None:
            raise ValueError(f"params: {bad!r} is not an engine argument name | fix: write snake_case names like "
                             "max_num_seqs, or speculative_config.method for a field (servetune makes the --flag)")
        return self


class ParamOverride(Strict):
    """Per-study narrowing of a parameter: any field given replaces the file's."""

    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool | None = None
    choices: list[Scalar] | None = None
    default: Scalar | None = None
    minor: bool | None = None

    @model_validator(mode="after")
    def _check(self) -> ParamOverride:
        """What can be judged without the space file (the merged parameter is checked again later)."""
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low <= high must hold, but got low={self.low:g} high={self.high:g}"
                             " | fix: swap them or narrow only one end")
        return self


class SearchSpaceRef(Strict):
    """Which space a study searches: the file (default search_spaces/<engine>.yaml) plus overrides."""

    file: str | None = None
    overrides: dict[str, ParamOverride] = {}
    fixed: dict[str, Any] = {}  # engine args set for every trial and not searched
    exclude: list[str] = []  # params of the file not to search (engine default used)
    constraints: list[Constraint] = []  # added to the file's

    @model_validator(mode="after")
    def _one_role(self) -> SearchSpaceRef:
        """A parameter has one role: narrowed (overrides), pinned (fixed) or left to the engine (exclude). Given
        two, one was silently ignored (fixed won over an override; an excluded one read as unknown)."""
        for name, v in self.fixed.items():
            if v is None:
                raise ValueError(f"fixed: {name} is null, which sets nothing | fix: give a value, or list {name} "
                                 "under exclude to leave it to the engine's default")
        twice = sorted({n for n in self.exclude if self.exclude.count(n) > 1})
        if twice:
            raise ValueError(f"exclude: {twice[0]!r} listed twice | fix: list each parameter once")
        for name in self.overrides:
            if name in self.fixed:
                raise ValueError(f"overrides: {name} is both fixed and narrowed under overrides (the fixed value "
                                 f"would win) | fix: keep {name} under fixed or under overrides, not both")
            if name in self.exclude:
                raise ValueError(f"overrides: {name} is both excluded and narrowed under overrides | fix: drop "
                                 "it from exclude to search it, or drop the override")
        both = [n for n in self.exclude if n in self.fixed]
        if both:
            raise ValueError(f"exclude: {both[0]} is both excluded (the engine's default) and fixed to "
                             f"{self.fixed[both[0]]!r} | fix: keep it under fixed or under exclude, not both")
        return self
