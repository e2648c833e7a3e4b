"""A study's `search_space.overrides` narrow a space file's parameter: any field given replaces the file's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.search.helpers import make_study
from tuner.common.errors import SpecError
from tuner.search.space import build_space

DRAFT = "speculative_config.num_speculative_tokens"


def _param(name: str, override: dict[str, Any]) -> Any:
    st = make_study(engine="sim", allow=["speculative_decoding"], search_space={"overrides": {name: override}})
    return build_space(st).engines["sim"].params[name]


def test_a_step_in_an_override_replaces_the_files_log_scale() -> None:
    """The space file has the draft length on a log scale (search42); a study that narrows it to even steps gets even
    steps, not "log scale and step cannot both be set"; an override asking for both is refused with a fix."""
    assert _param(DRAFT, {"low": 1}).log
    p = _param(DRAFT, {"low": 2, "high": 8, "step": 2})
    assert (p.log, p.step, p.low, p.high) == (False, 2, 2, 8)
    assert _param("max_num_partial_prefills", {"log": True}).log
    with pytest.raises(SpecError, match="log scale and step cannot both be set") as exc:
        _param(DRAFT, {"step": 2, "log": True})
    assert "give a step with log: false" in str(exc.value) and DRAFT in str(exc.value)
