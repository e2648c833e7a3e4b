"""Everything checked before any engine starts. Each problem is a SpecError (exit 2) saying what, where, how."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.engines.base import LaunchSpec
from tuner.search.space import Space, build_space
from tuner.spec.load import special_file
from tuner.spec.study import Study


def check_output_dir(out: Path) -> None:
    """The output folder can be created and written; folders made for the check are removed again, so a
    dry run or a refused study leaves nothing behind (the run makes the folder when it starts)."""
    made = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".writable.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise SpecError(f"output folder {out} is not writable ({exc.strerror or exc})", "--output",
                        "choose a folder you can write to") from None
    finally:
        for p in made:  # deepest first
            with contextlib.suppress(OSError):
                p.rmdir()


def check_model(study: Study, base_dir: Path) -> None:
    m = study.model
    path = Path(m.name)
    if not path.is_absolute():
        path = base_dir / path if (base_dir / path).exists() else path
    if m.must_exist and not path.exists():
        raise SpecError(f"model path {m.name} does not exist", "model.name",
                        "give an existing local folder, or set must_exist: false for a hub id")
    if m.sha256_manifest is not None:
        verify_manifest(path, m.sha256_manifest if m.sha256_manifest.is_absolute() else base_dir / m.sha256_manifest)


def verify_manifest(model_dir: Path, manifest: Path) -> None:
    """Check model files against a `sha256sum`-style manifest (the seeds' advice for production). A manifest
    that lists nothing verifies nothing, and one naming files outside the model folder checks other files."""
    if not manifest.exists():
        raise SpecError(f"SHA-256 manifest {manifest} not found", "model.sha256_manifest", "check the path")
    kind = "a folder" if manifest.is_dir() else special_file(manifest)
    if kind is not None:
        raise SpecError(f"SHA-256 manifest {manifest} is {kind}, not a file", "model.sha256_manifest",
                        "give the sha256sum output saved to a file")
    try:
        lines = manifest.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise SpecError(f"SHA-256 manifest {manifest} is not UTF-8 text ({exc.reason})", "model.sha256_manifest",
                        "use sha256sum output, saved as UTF-8") from None
    checked = 0
    for i, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise SpecError(f"line {i} is not '<sha256>  <file>'", f"{manifest}:{i}", "use sha256sum output")
        digest, name = parts[0].lower(), parts[1].strip().lstrip("*")
        if not all(c in "0123456789abcdef" for c in digest):
            raise SpecError(f"line {i}: {parts[0]!r} is not a SHA-256 (64 hexadecimal digits)", f"{manifest}:{i}",
                            "use sha256sum output")
        f = model_dir / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise SpecError(f"model file {name} listed in the manifest is outside the model folder", f"{manifest}:{i}",
                            "list the model's files by their paths inside its folder (run sha256sum there)")
        if not f.exists():
            raise SpecError(f"model file {name} listed in the manifest is missing", f"{manifest}:{i}",
                            "restore the file or regenerate the manifest")
        if not f.is_file():
            raise SpecError(f"model file {name} listed in the manifest is not a regular file", f"{manifest}:{i}",
                            "list files only (sha256sum output), not folders or pipes")
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        if h.hexdigest() != digest:
            raise SpecError(f"SHA-256 of {name} does not match the manifest (file changed or corrupt)",
                            f"{manifest}:{i}", "re-download the model from a trusted source")
        checked += 1
    if not checked:
        raise SpecError(f"SHA-256 manifest {manifest} lists no files, so it verifies nothing", "model.sha256_manifest",
                        "save sha256sum output of the model's files there, or leave sha256_manifest out")


def check_engines(study: Study, space: Space) -> None:
    from tuner.engines import get_engine
    from tuner.engines.args import bad_names

    for name in study.engine_names:
        engine = get_engine(name)
        sp = space.engines[name]
        where = f"search_space{'.' + name if isinstance(study.search_space, dict) else ''}.fixed"
        bad = bad_names(sp.fixed)
        if bad:  # a name like "x --trust-remote-code" would smuggle a flag into the argv
            raise SpecError(f"engine argument name {bad[0]!r} is not a snake_case name", where,
                            "write names like max_num_seqs (servetune makes the --flag from it)")
        engine.preflight(study)
        # the engine's run settings (its own interpreter): arguments are checked by its own parser. The
        # defaults, then every choice of every categorical param (precision, speculative method, layout...)
        # folded into engine args as a trial launches them: the engine's parser sees each one
        launch = LaunchSpec.for_check(study.model, engine.run_settings(study))
        loc = where if sp.fixed else where.removesuffix(".fixed")  # where a value that chokes a check was written
        try:
            probes = sp.probes()
        except (TypeError, ValueError, ArithmeticError) as exc:  # the constraints met a value of the wrong kind
            raise _choked(name, exc, "defaults", loc, sp.fixed) from None
        for probe, args in probes:
            try:
                engine.check_args(args, launch)
            except (TypeError, ValueError, ArithmeticError) as exc:  # an engine's own check choked on a value
                raise _choked(name, exc, probe, loc, sp.fixed) from None
            except SpecError as exc:  # engines say "args.<name>"; the user wrote it under search_space.fixed
                key = exc.where.removeprefix("args.")
                if exc.where.startswith("args.") and key in sp.fixed:
                    raise SpecError(exc.what, f"{where}.{key}", exc.fix) from None
                at = exc.where
                if exc.where.startswith("args.") and key in sp.params:  # a value of the space: where it was written
                    base = where.removesuffix(".fixed")
                    at = f"{base}.overrides.{key}" if key in study.space_ref(name).overrides else f"{base}.file params.{key}"
                if probe != "defaults":
                    raise SpecError(f"{exc.what} (with {probe})", at, exc.fix) from None
                raise SpecError(exc.what, at, exc.fix) from None


def _choked(engine: str, exc: Exception, probe: str, where: str, fixed: dict[str, Any]) -> SpecError:
    """A value of a kind the engine's arguments or the space's constraints cannot use (a list where a number
    belongs) made a check raise a plain TypeError/ValueError: bad input, named (the fixed argument too, when
    only one is a list or mapping)."""
    odd = [k for k, v in fixed.items() if isinstance(v, list | dict)]
    where = f"{where}.{odd[0]}" if len(odd) == 1 and where.endswith(".fixed") else where
    what = f"the {engine} engine cannot take these arguments ({type(exc).__name__}: {str(exc)[:200]})"
    return SpecError(what + ("" if probe == "defaults" else f" (with {probe})"), where,
                     "give each fixed argument a value of the kind the engine takes (a number, true/false or text)")


def check_space_files(study: Study, base_dir: Path) -> None:
    """A missing search_space.file is named as such, with the places looked in."""
    from tuner.engines.base import SPACES_DIR

    if isinstance(study.search_space, dict):  # per-engine blocks: one for an engine not run would be ignored
        for key in study.search_space:
            if key not in study.engine_names:
                raise SpecError(f"search_space has a block for {key!r}, which this study does not run",
                                f"search_space.{key}", f"key the blocks by the study's engines: {study.engine_names}")
    for engine in study.engine_names:
        ref = study.space_ref(engine)
        if not ref.file:
            continue
        path = Path(ref.file)
        places = [path] if path.is_absolute() else [base_dir / path, path, SPACES_DIR.parent / path]
        where = f"search_space{'.' + engine if isinstance(study.search_space, dict) else ''}.file"
        found = next((p for p in places if p.is_file()), None)
        odd = next((p for p in places if p.exists() or p.is_symlink()), None) if found is None else None
        if odd is not None:  # there, but not a file: say what it is rather than "not found"
            kind = "a folder" if odd.is_dir() else special_file(odd) or (
                "a symbolic link to nothing" if odd.is_symlink() and not odd.exists() else "not a regular file")
            raise SpecError(f"search-space file {odd} is {kind}", where, "give the path of a .yaml search-space file")
        if found is None:
            looked = ", ".join(dict.fromkeys(str(p) for p in places))
            raise SpecError(f"search-space file {ref.file} not found (looked for {looked})",
                            where, "give a path relative to the study file, or leave file out for the built-in space")


def check_satisfiable(space: Space) -> None:
    """Reject constraints that together leave no value (e.g. `a <= 32` and `a >= 64`), by narrowing ranges;
    `==` intersects them, `!=` removes a categorical's choices, and `a < a` never holds."""
    for name, sp in space.engines.items():
        prefix = f"search_space{'.' + name if space.joint else ''}"
        n_file = len(sp.constraints) - (len(sp.study.space_ref(name).constraints) if sp.study is not None else 0)
        loc = functools.partial(_constraint_at, prefix, n_file)
        bounds: dict[str, list[float]] = {"max_model_len": [sp.max_model_len] * 2}
        for k, v in sp.fixed.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                bounds[k] = [float(v), float(v)]
        left: dict[str, list[Any]] = {}  # categorical choices `!=` has not ruled out
        for k, p in sp.params.items():
            nums = [c for c in p.choices or [] if isinstance(c, (int, float)) and not isinstance(c, bool)]
            if p.type in ("int", "float"):
                bounds[k] = [float(p.low), float(p.high)]  # type: ignore[arg-type]
            elif p.type == "categorical" and nums and len(nums) == len(p.choices or []):
                bounds[k] = [float(min(nums)), float(max(nums))]
                left[k] = list(nums)
        # repair constraints too: a repair cannot move a value into a range that holds none
        hard = [(i, c) for i, c in enumerate(sp.constraints) if not c.when]
        for i, c in hard:
            lhs, op, rhs = c.parts()
            if lhs == rhs and op in ("<", ">", "!="):  # `a < a`: no value is smaller than itself
                raise SpecError(f"constraint {c.require!r} can never hold (a value compared with itself)", loc(i),
                                "compare two different parameters, or drop the constraint")
        for i, c in hard:
            if not _narrow([c], bounds, left):
                raise SpecError(f"constraint {c.require!r} can never hold within the parameter ranges", loc(i),
                                "widen the ranges or drop the constraint")
        if not _narrow([c for _, c in hard], bounds, left):
            pair = next(([a, b] for n, (_, a) in enumerate(hard) for _, b in hard[n + 1:]
                         if not _narrow([a, b], bounds, left)), [c for _, c in hard])
            names = ", ".join(repr(x.require) for x in pair)
            raise SpecError(f"the {name} constraints contradict each other: no value meets all of {names}",
                            f"{prefix}.constraints", "drop or loosen one of them")


def _narrow(constraints: list[Any], start: dict[str, list[float]], choices: dict[str, list[Any]]) -> bool:
    """Narrow copies of the parameter intervals (and categorical choices) by the constraints until nothing
    moves; False when some parameter is left with no value."""
    bounds = {k: list(v) for k, v in start.items()}
    left = {k: list(v) for k, v in choices.items()}
    for _ in range(10):  # a few sweeps of interval narrowing reach a fixed point for these small sets
        for c in constraints:
            lhs, op, rhs = c.parts()
            a, b = _interval(lhs, bounds), _interval(rhs, bounds)
            if a is None or b is None:
                continue
            if op == "!=":
                for var, other in ((lhs, b), (rhs, a)):
                    if var in left and other[0] == other[1]:
                        left[var] = [v for v in left[var] if v != other[0]]
                        if not left[var]:
                            return False
            elif op == "==":
                lo, hi = max(a[0], b[0]), min(a[1], b[1])
                a[0], a[1], b[0], b[1] = lo, hi, lo, hi
            elif op in ("<=", "<"):  # a <= b: a.high <= b.high, b.low >= a.low
                a[1], b[0] = min(a[1], b[1]), max(b[0], a[0])
            else:
                a[0], b[1] = max(a[0], b[0]), min(b[1], a[1])
            if a[0] > a[1] or b[0] > b[1]:
                return False
    return True


def _constraint_at(prefix: str, n_file: int, i: int) -> str:
    """Where constraint i of an engine's space was written: the space file's list, then the study's."""
    return f"{prefix}.constraints[{i - n_file}]" if i >= n_file else f"{prefix}.file constraints[{i}]"


def check_conditions_acyclic(space: Space) -> None:
    """A `when` on the parameter itself, or conditions that go round (a when b, b when a), make a knob's
    activity depend on its own value: refused rather than sampled in whatever order the search picks."""
    for name, sp in space.engines.items():
        prefix = f"search_space{'.' + name if space.joint else ''}"
        deps = {k: set(p.when or {}) & set(sp.params) for k, p in sp.params.items()}
        for start in deps:
            reach = _reach(deps, start)
            if start in reach:
                ring = [d for d in deps if d != start and d in reach and start in _reach(deps, d)]
                raise SpecError(f"{start}'s condition depends on {start} itself ({' -> '.join([start, *ring, start])})",
                                f"{prefix}.file params.{start}.when", f"condition {start} on other parameters only")


def _reach(deps: dict[str, set[str]], start: str) -> set[str]:
    """Every parameter `start`'s condition depends on, directly or through others."""
    seen: set[str] = set()
    todo = list(deps.get(start, set()))
    while todo:
        cur = todo.pop()
        if cur not in seen:
            seen.add(cur)
            todo += deps.get(cur, set())
    return seen


def _interval(token: str, bounds: dict[str, list[float]]) -> list[float] | None:
    try:
        v = float(token)
    except ValueError:
        return bounds.get(token)
    return [v, v]


def check_engines_installed(study: Study) -> None:
    from tuner.engines import get_engine
    from tuner.run.checks import check_engine_installed

    for name in study.engine_names:
        engine = get_engine(name)
        if not hasattr(engine, "module") or not hasattr(engine, "python"):  # the simulator, plug-in engines
            continue
        settings = engine.run_settings(study)
        command = getattr(settings, "command", None)
        if command and getattr(settings, "check_args", True) and shutil.which(command[0]) is None:
            raise SpecError(f"the engine command's program {command[0]!r} is not found or not executable",
                            f"engines.{name}.command", "give the program's path (or a name on PATH), or set "
                            f"engines.{name}.check_args: false when it exists only on the cluster's GPU nodes")
        python = engine.python(LaunchSpec.for_check(study.model, settings))
        if python is not None and getattr(settings, "check_args", True):
            check_engine_installed(name, python, engine.module)


def preflight(study: Study, base_dir: Path, out: Path) -> Space:
    """Every check a real run makes before it starts anything; all problems found are reported at once."""
    from tuner.run.checks import (
        check_model_fits,
        check_model_path,
        check_objective_classes,
        check_workload_fits,
        workload_classes,
    )

    errors: list[SpecError] = []

    def run(check: Any, *args: Any, where: str = "") -> Any:
        try:
            return check(*args)
        except SpecError as exc:
            errors.append(exc)
        except OSError as exc:  # a path the input names that the OS refuses (too long, not a folder, no access)
            name = exc.filename if exc.filename is not None else ""
            errors.append(SpecError(f"cannot use {str(name)[:200]!s}: {exc.strerror or exc}", where,
                                    "give a path that exists and that this user can read"))
        return None

    run(check_space_files, study, base_dir, where="search_space.file")
    space = run(build_space, study, base_dir, where="search_space") if not errors else None
    if space is not None:
        run(check_satisfiable, space)
        run(check_conditions_acyclic, space)
    classes = run(workload_classes, study.workload, base_dir, where="workload")
    if classes is not None:
        run(check_workload_fits, study, classes, where="workload")
        run(check_objective_classes, study, classes)
    n = len(errors)
    run(check_model_path, study, base_dir, where="model.name")
    if len(errors) == n:  # a path already refused is not checked twice
        run(check_model, study, base_dir, where="model")
    if len(errors) == n:
        run(check_model_fits, study, base_dir, where="model.name")
    n = len(errors)
    run(check_engines_installed, study)
    if space is not None and len(errors) == n:
        run(check_engines, study, space)
    run(check_output_dir, out, where="--output")
    if errors:
        raise combined(errors)
    assert space is not None
    return space


def combined(errors: list[SpecError]) -> SpecError:
    """One message for several problems: the first in full, the others after "also:"."""
    first = errors[0]
    if len(errors) == 1:
        return first
    more = "; ".join(f"{e.where}: {e.what}" if e.where else e.what for e in errors[1:6])
    return SpecError(f"{first.what} (also: {more})", first.where, first.fix)
