"""Everything checked before any engine starts. Each problem is a SpecError (exit 2) saying what, where, how."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from tuner.errors import SpecError
from tuner.search.space import Space, build_space
from tuner.spec.study import Study


def check_output_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".writable.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise SpecError(f"output folder {out} is not writable ({exc.strerror or exc})", "--output",
                        "choose a folder you can write to") from None


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
    """Check model files against a `sha256sum`-style manifest (the seeds' advice for production)."""
    if not manifest.exists():
        raise SpecError(f"SHA-256 manifest {manifest} not found", "model.sha256_manifest", "check the path")
    for i, line in enumerate(manifest.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise SpecError(f"line {i} is not '<sha256>  <file>'", f"{manifest}:{i}", "use sha256sum output")
        digest, name = parts[0].lower(), parts[1].strip().lstrip("*")
        f = model_dir / name
        if not f.exists():
            raise SpecError(f"model file {name} listed in the manifest is missing", f"{manifest}:{i}",
                            "restore the file or regenerate the manifest")
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        if h.hexdigest() != digest:
            raise SpecError(f"SHA-256 of {name} does not match the manifest (file changed or corrupt)",
                            f"{manifest}:{i}", "re-download the model from a trusted source")


def check_engines(study: Study, space: Space) -> None:
    from tuner.engines import get_engine

    for name in study.engine_names:
        engine = get_engine(name)
        if name == "sim":
            from tuner.sim import known_gpus, shape_for

            shape_for(study.model.shape or study.model.name)
            if study.sim.gpu not in known_gpus():
                raise SpecError(f"unknown GPU {study.sim.gpu!r} for the simulator", "sim.gpu",
                                f"use one of {known_gpus()}")
        sp = space.engines[name]
        engine.check_args({**sp.defaults(), **sp.fixed}, None)


def preflight(study: Study, base_dir: Path, out: Path) -> Space:
    space = build_space(study, base_dir)
    from tuner.load.workload import validate_workload

    validate_workload(study.workload, base_dir)
    check_model(study, base_dir)
    check_engines(study, space)
    check_output_dir(out)
    return space
