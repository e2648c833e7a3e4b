"""One atomic JSON writer for every output (pareto.json, summary.json, ...): always valid JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tuner.common.atomic import write_json
from tuner.load import bench_output


def _strict_load(path: Path) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("writer", [write_json, bench_output.write_json])
def test_nan_and_infinity_are_written_as_null(writer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "out.json"
    writer(path, {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": 2.5})
    assert _strict_load(path) == {"a": None, "b": [1.0, None, {"c": None}], "d": 2.5}
    assert not list(tmp_path.glob(".*")), "no temporary file left behind"
