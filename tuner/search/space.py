"""One canonical search space per study, converted to Optuna at a single seam.

A `Space` holds, per engine, the parameters of search_spaces/<engine>.yaml narrowed by the study's
overrides, the fixed arguments, and the known constraints. `sample(trial)` is define-by-run, so
conditional parameters (``when``) and joint studies (engine as a categorical) need no special cases.
Parameter names in Optuna are ``<engine>.<param>`` so both engines of a joint study keep their own.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from pydantic import ValidationError

from tuner.common.errors import SpecError
from tuner.engines import get_engine
from tuner.engines.base import SPACES_DIR
from tuner.spec import levers
from tuner.spec.load import load_space_file
from tuner.spec.space_file import Constraint, Param
from tuner.spec.strict import BIGGEST
from tuner.spec.study import Study

_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq, "!=": operator.ne}


class Rejected(Exception):
    """A config breaks a known constraint that cannot be repaired: never launched."""


@dataclass
class EngineSpace:
    engine: str  # a registered engine: vllm | sglang | sim | ...
    flavour: str  # whose knobs (the sim imitates vllm or sglang; a real engine is its own)
    params: dict[str, Param]
    constraints: list[Constraint]
    fixed: dict[str, Any] = field(default_factory=dict)
    max_model_len: int = 8192
    memory_knobs: tuple[str, ...] = ()  # larger values need more GPU memory (from the engine's home)
    pinned: dict[str, str] = field(default_factory=dict)  # params left at baseline, and why (levers guard)
    study: Study | None = None  # for folding structured args (draft models come from the study)

    def baseline(self) -> dict[str, Any]:
        """The engine's defaults: every searched flag left out (the engine resolves it)."""
        return {}

    def defaults(self) -> dict[str, Any]:
        """Default values as known from the space file (for ratios and repair context)."""
        return {k: p.default for k, p in self.params.items() if p.default is not None}

    def active(self, name: str, values: dict[str, Any]) -> bool:
        cond = self.params[name].when
        if not cond:
            return True
        full = {**self.defaults(), **values}
        return all(full.get(k) in v if isinstance(v, list) else full.get(k) == v for k, v in cond.items())

    def probes(self) -> list[tuple[str, dict[str, Any]]]:
        """Configs for the engine's own parser before any launch: the defaults, then each choice of
        every categorical param (the params it activates at their defaults), repaired and folded as a
        trial would be. Returns (what it probes, engine args)."""
        base = {k: v for k, v in self.defaults().items() if self.active(k, self.defaults())}
        todo: list[tuple[str, dict[str, Any]]] = [("defaults", base)]
        for name, p in self.params.items():
            if p.type != "categorical":
                continue
            for choice in p.choices or []:
                if choice == p.default:
                    continue
                values = {**self.defaults(), name: choice}
                values = {k: v for k, v in values.items() if self.active(k, values)}
                todo.append((f"{name}={choice}", values))
        out = []
        for label, values in todo:
            try:
                args, _ = self.apply_constraints(values)
            except Rejected:
                continue
            out.append((label, args))
        return out

    def sample(self, trial: optuna.Trial, prefix: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, p in self.params.items():
            if not self.active(name, values):
                continue
            key = f"{prefix}{name}"
            if p.type in ("int", "float"):
                assert p.low is not None and p.high is not None  # Param's validator requires both
                if p.type == "int":
                    values[name] = trial.suggest_int(key, int(p.low), int(p.high), step=int(p.step or 1),
                                                     log=p.log)
                else:
                    values[name] = trial.suggest_float(key, p.low, p.high, step=p.step, log=p.log)
            elif p.type == "bool":
                values[name] = trial.suggest_categorical(key, [True, False])
            else:
                values[name] = trial.suggest_categorical(key, list(p.choices or []))
        return values

    def grid(self, points_per_range: int = 4) -> list[dict[str, Any]]:
        """A Cartesian grid (for the grid searcher and the search-efficiency benchmark)."""
        import itertools

        import numpy as np

        axes: list[tuple[str, list[Any]]] = []
        for name, p in self.params.items():
            vals: list[Any]
            if p.type in ("int", "float"):
                assert p.low is not None and p.high is not None
                lo, hi = float(p.low), float(p.high)
                raw = np.geomspace(lo, hi, points_per_range) if p.log else np.linspace(lo, hi, points_per_range)
                vals = sorted({int(round(v)) if p.type == "int" else round(float(v), 4) for v in raw})
            elif p.type == "bool":
                vals = [True, False]
            else:
                vals = list(p.choices or [])
            axes.append((name, vals))
        out, seen = [], set()
        for combo in itertools.product(*[v for _, v in axes]):
            cfg = dict(zip([n for n, _ in axes], combo, strict=True))
            cfg = {k: v for k, v in cfg.items() if self.active(k, cfg)}
            key = tuple(sorted(cfg.items()))
            if key not in seen:
                seen.add(key)
                out.append(cfg)
        return out

    def apply_constraints(self, values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Repair or reject a sampled config. Returns engine args (fixed included) and repair notes."""
        args = {**values, **self.fixed}
        notes: list[str] = []
        context = {**self.defaults(), "max_model_len": self.max_model_len, **args}
        context = {k: v for k, v in context.items() if k not in self.params or k in args or self.active(k, args)}
        context.update(levers.derived(context))
        for c in self.constraints:
            if c.when and not all(context.get(k) in v if isinstance(v, list) else context.get(k) == v
                                  for k, v in c.when.items()):
                continue
            lhs, op, rhs = c.parts()
            a, b = _value(lhs, context), _value(rhs, context)
            if a is None or b is None or _OPS[op](a, b):
                continue
            if c.action == "reject" or lhs not in self.params or lhs in self.fixed:
                raise Rejected(f"{c.require} does not hold ({lhs}={a}, {rhs}={b}){': ' + c.why if c.why else ''}")
            p = self.params[lhs]
            new = _repair(p, op, b)
            if new is None:
                where = f"range [{p.low:g}, {p.high:g}]" if p.low is not None else f"choices {p.choices}"
                raise Rejected(f"{c.require} cannot be met within {lhs}'s {where}")
            notes.append(f"repaired {lhs}: {a} -> {new} so that {c.require}")
            args[lhs] = new
            context[lhs] = new
            context.update(levers.derived(context))
        if self.study is not None:
            args = levers.fold(args, self.params, self.study)
        return args, notes


def _value(token: str, context: dict[str, Any]) -> float | None:
    if "*" in token:
        a, b = (_value(t, context) for t in token.split("*", 1))
        return None if a is None or b is None else a * b
    try:
        return float(token)
    except ValueError:
        v = context.get(token)
        return None if v is None or isinstance(v, (str, bool)) else float(v)


def _repair(p: Param, op: str, bound: float) -> int | float | None:
    lo, hi = float(p.low or 0), float(p.high or 0)
    if op in ("<=", "<"):
        target = bound if op == "<=" else bound - 1
    elif op in (">=", ">"):
        target = bound if op == ">=" else bound + 1
    else:
        return None
    if p.type != "int" and p.type != "float":
        return None
    # Repairs may leave the search range (e.g. batched tokens up to max_model_len): engines accept it.
    target = max(target, lo) if op in (">=", ">") else min(target, hi)
    return int(target) if p.type == "int" else float(target)


class Space:
    """The whole study's space: one EngineSpace per engine; engine is a dimension in joint studies."""

    def __init__(self, engines: dict[str, EngineSpace]) -> None:
        self.engines = engines

    @property
    def joint(self) -> bool:
        return len(self.engines) > 1

    def sample(self, trial: optuna.Trial) -> tuple[str, dict[str, Any]]:
        names = list(self.engines)
        engine = trial.suggest_categorical("engine", names) if self.joint else names[0]
        return engine, self.engines[engine].sample(trial, f"{engine}.")

    def minor(self) -> frozenset[str]:
        """Optuna names (`<engine>.<knob>`) of the knobs the space marks `minor`: `tpe-coord` moves them last."""
        return frozenset(f"{e}.{n}" for e, sp in self.engines.items() for n, p in sp.params.items() if p.minor)

    def memory(self) -> frozenset[str]:
        """Optuna names of the knobs whose larger values need more GPU memory (the engines' `memory_knobs`)."""
        return frozenset(f"{e}.{n}" for e, sp in self.engines.items() for n in sp.memory_knobs if n in sp.params)

    def levers(self) -> frozenset[str]:
        """Optuna names of the knobs that change outputs (an `output_class`: precision, speculative decoding) and of
        the knobs active only under one of them (the draft length): the levers `tpe-coord` checks when it stalls."""
        out = set()
        for e, sp in self.engines.items():
            classed = {n for n, p in sp.params.items() if p.output_class}
            out |= {f"{e}.{n}" for n, p in sp.params.items() if n in classed or set(p.when or {}) & classed}
        return frozenset(out)

    def describe(self) -> list[str]:
        lines = []
        for e, sp in self.engines.items():
            for n, p in sp.params.items():
                rng = f"{p.choices}" if p.type in ("categorical",) else (
                    "[true, false]" if p.type == "bool" else f"[{p.low:g}, {p.high:g}]{' log' if p.log else ''}")
                cond = f" when {p.when}" if p.when else ""
                lines.append(f"{e}.{n}: {p.type} {rng} default={p.default}{cond}{' (minor)' if p.minor else ''}")
            for n, why in sp.pinned.items():
                lines.append(f"{e}.{n}: not searched: {why}")
            for c in sp.constraints:
                lines.append(f"{e} constraint: {c.require}{' if ' + str(c.when) if c.when else ''} ({c.action})")
            if sp.fixed:
                lines.append(f"{e} fixed: {sp.fixed}")
        return lines


def build_space(study: Study, base_dir: Path | None = None) -> Space:
    engines = {}
    for engine in study.engine_names:
        home = get_engine(engine)
        flavour = home.flavour(study)
        ref = study.space_ref(engine)
        where = f"search_space{'.' + engine if isinstance(study.search_space, dict) else ''}"
        if ref.file:
            path = Path(ref.file)
            if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
                path = base_dir / path
            elif not path.is_absolute() and not path.exists():
                path = SPACES_DIR.parent / path
        else:
            path = home.space_path(study)
        spec = load_space_file(path)
        if spec.engine != flavour:
            raise SpecError(f"{path} is a space for {spec.engine!r}, not {flavour!r}", f"{where}.file",
                            f"use search_spaces/{flavour}.yaml")
        params = dict(spec.params)
        for name in ref.exclude:
            if name not in params:
                raise SpecError(f"cannot exclude unknown parameter {name!r}", f"{where}.exclude",
                                f"known: {sorted(params)}")
            del params[name]
        for name, ov in ref.overrides.items():
            if name not in params:
                raise SpecError(f"override of unknown parameter {name!r}", f"{where}.overrides.{name}",
                                f"known parameters of {path.name}: {sorted(params)}")
            if ov.choices is not None:
                _check_override_choices(params[name], ov.choices, name, f"{where}.overrides.{name}")
            merged = {**params[name].model_dump(), **ov.model_dump(exclude_none=True)}
            # the override's scale replaces the file's: a step means even steps (the draft length is log in the file)
            if ov.step is not None and ov.log is None:
                merged["log"] = False
            if ov.log and ov.step is None:
                merged["step"] = None
            if ov.choices is not None:  # narrowed choices drop the needs of the choices left out
                kept = {str(c) for c in ov.choices}
                merged["choice_needs"] = {c: n for c, n in merged["choice_needs"].items() if c in kept}
            try:
                params[name] = Param.model_validate(merged)
            except ValidationError as exc:
                msg, _, fix = exc.errors()[0]["msg"].removeprefix("Value error, ").partition(" | fix: ")
                raise SpecError(msg, f"{where}.overrides.{name}",
                                fix or "make low <= high and keep values of the right type") from None
        declared = dict(params)  # as the study's overrides leave them: a condition may name a widened choice
        for name in ref.fixed:
            params.pop(name, None)  # fixed arguments are not searched
        pinned = levers.guard(params, ref.fixed, study, where)
        engines[engine] = EngineSpace(
            engine=engine,
            flavour=flavour,
            params=params,
            constraints=[*spec.constraints, *ref.constraints],
            fixed=dict(ref.fixed),
            max_model_len=study.model.max_model_len,
            memory_knobs=home.memory_knobs_for(flavour),
            pinned=pinned,
            study=study,
        )
        _check_constraints(engines[engine], where, len(spec.constraints), set(spec.params))
        _check_conditions(spec.params, engines[engine], where, len(spec.constraints), declared)
    return Space(engines)


def _kind(v: Any) -> str:
    return "true/false" if isinstance(v, bool) else "numbers" if isinstance(v, int | float) else "text"


def _check_override_choices(p: Param, choices: list[Any], name: str, where: str) -> None:
    """A study may narrow or extend a categorical's choices, but in the kind the engine takes (numbers stay
    numbers): `block_size: {choices: ["x"]}` would start every trial with an argument the engine refuses."""
    kinds = {_kind(c) for c in p.choices or []}
    for c in choices:
        if len(kinds) == 1 and _kind(c) not in kinds:
            raise SpecError(f"choice {c!r} is {_kind(c)}, but {name}'s choices are {kinds.pop()} ({p.choices})", where,
                            f"give choices like {p.choices}")
        if isinstance(c, float) and not math.isfinite(c) or isinstance(c, int | float) and abs(c) > BIGGEST:
            raise SpecError(f"choice {c!r} is not a usable number", where, f"give choices like {p.choices}")


def _check_conditions(file_params: dict[str, Param], sp: EngineSpace, where: str, n_file: int,
                      declared: dict[str, Param]) -> None:
    """A param's `when` and a constraint's `if` name known parameters with values they can take: a typo
    there would silently switch a knob or a constraint off for the whole study. A value counts when the file's
    parameter or the study's override of it (`declared`: widened or narrowed choices) can take it."""
    conds: list[tuple[str, dict[str, Any]]] = [
        (f"{where}.file params.{name}.when", p.when) for name, p in file_params.items() if p.when]
    conds += [(f"{where}.constraints[{i - n_file}].if" if i >= n_file else f"{where}.file constraints[{i}].if",
               c.when) for i, c in enumerate(sp.constraints) if c.when]
    for loc, cond in conds:
        for key, want in cond.items():
            p = file_params.get(key)
            if p is None:
                if key in sp.fixed:
                    continue
                raise SpecError(f"condition on unknown parameter {key!r}", loc, f"known: {sorted(file_params)}")
            if want == []:
                raise SpecError(f"condition on {key} lists no values, so it never holds", loc,
                                f"list the {key} values it applies to, or drop the condition")
            for v in want if isinstance(want, list) else [want]:
                q = declared.get(key, p)
                if not (_can_take(p, v) or _can_take(q, v)):
                    raise SpecError(f"{key} can never be {v!r} (its values: {_values_text(q)}), so the condition "
                                    "never holds", loc, f"use one of {key}'s values")


def _can_take(p: Param, v: Any) -> bool:
    if p.type == "bool":
        return isinstance(v, bool)
    if p.type == "categorical":
        return any(v == c and isinstance(v, bool) == isinstance(c, bool) for c in p.choices or [])
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return float(p.low) <= v <= float(p.high)  # type: ignore[arg-type]


def _values_text(p: Param) -> str:
    if p.type == "bool":
        return "true/false"
    if p.type == "categorical":
        return str(p.choices)
    return f"{p.low:g}..{p.high:g}"


def _check_constraints(sp: EngineSpace, where: str, n_file: int = 0, file_params: set[str] | None = None) -> None:
    """Constraints must name known parameters, and a reject constraint must be able to hold.

    The first `n_file` constraints come from the space file; the rest are the study's own, reported
    by their index in the study's search_space.constraints."""
    # a param of the file that is excluded or pinned keeps its name: constraints on it are skipped
    known = {*sp.params, *sp.fixed, *(file_params or ()), "max_model_len", *levers.DERIVED}

    def loc(i: int) -> str:
        return f"{where}.constraints[{i - n_file}]" if i >= n_file else f"{where}.file constraints[{i}]"

    for i, c in enumerate(sp.constraints):
        lhs, _, rhs = c.parts()
        for tok in (t for side in (lhs, rhs) for t in side.split("*")):
            if tok not in known and _value(tok, {}) is None:
                raise SpecError(f"constraint {c.require!r} names unknown parameter {tok!r}",
                                loc(i), f"known: {sorted(known)}")
    # A space whose every corner violates a reject constraint can never launch a trial.
    for i, c in enumerate(sp.constraints):
        if c.action != "reject" or c.when:
            continue
        lhs, op, rhs = c.parts()
        lo_hi = [_range(sp, lhs), _range(sp, rhs)]
        if None in lo_hi:
            continue
        (a_lo, a_hi), (b_lo, b_hi) = lo_hi  # type: ignore[misc]
        best_a, best_b = (a_lo, b_hi) if op in ("<=", "<") else (a_hi, b_lo)
        if op in ("<=", "<", ">=", ">") and not _OPS[op](best_a, best_b):
            raise SpecError(f"constraint {c.require!r} can never hold within the parameter ranges",
                            loc(i), "widen the ranges or drop the constraint")


def _range(sp: EngineSpace, tok: str) -> tuple[float, float] | None:
    v = _value(tok, {"max_model_len": sp.max_model_len, **sp.fixed})
    if v is not None:
        return v, v
    p = sp.params.get(tok)
    if p is None or p.type not in ("int", "float"):
        return None
    return float(p.low), float(p.high)  # type: ignore[arg-type]
