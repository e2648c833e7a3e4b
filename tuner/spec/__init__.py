"""User-facing files, validated strictly: study, search space, workload."""

from typing import Any

__all__ = ["Study", "load_space_file", "load_study", "load_yaml"]


def __getattr__(name: str) -> Any:
    """Lazy: a light submodule (tuner.spec.sla) does not pull in pydantic and every model."""
    if name == "Study":
        from tuner.spec.study import Study

        return Study
    if name in ("load_space_file", "load_study", "load_yaml"):
        from tuner.spec import load

        return getattr(load, name)
    raise AttributeError(name)
