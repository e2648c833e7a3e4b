"""User-facing files, validated strictly: study, search space, workload."""

from tuner.spec.load import load_space_file, load_study, load_yaml
from tuner.spec.study import Study

__all__ = ["Study", "load_study", "load_space_file", "load_yaml"]
