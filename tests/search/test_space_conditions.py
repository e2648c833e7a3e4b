"""Conditions (`when`, `if`) are checked against the values a study's space can take, overrides included."""

from __future__ import annotations

from typing import Any

import pytest

from tests.search.helpers import make_study
from tuner.common.errors import SpecError
from tuner.search.space import build_space
from tuner.spec.study import Study


def study(search_space: dict[str, Any], **over: Any) -> Study:
    return make_study(engine="sim", search_space=search_space, **over)


def rule(cond: dict[str, Any]) -> dict[str, Any]:
    return {"require": "max_num_seqs <= 512", "if": cond, "action": "reject", "why": "test"}


def test_a_constraint_may_name_a_choice_the_study_widened() -> None:
    """The space file offers tensor_parallel_size [1] and says to widen it in a study: a rule on the widened
    value is the study's to make (it was refused as 'can never be 2')."""
    space = build_space(study({"overrides": {"tensor_parallel_size": {"choices": [1, 2]}},
                               "constraints": [rule({"tensor_parallel_size": 2})]}))
    assert space.engines["sim"].params["tensor_parallel_size"].choices == [1, 2]


def test_a_narrowed_choice_keeps_the_files_conditions_valid() -> None:
    """Narrowing the speculative methods leaves the file's `when` on the others harmless."""
    st = study({"overrides": {"speculative_config.method": {"choices": ["none", "ngram"]}}},
               allow=["speculative_decoding"])
    assert build_space(st).engines["sim"].params["speculative_config.method"].choices == ["none", "ngram"]


def test_a_value_neither_the_file_nor_the_override_takes_is_refused() -> None:
    with pytest.raises(SpecError, match=r"tensor_parallel_size can never be 4 \(its values: \[1, 2\]\)"):
        build_space(study({"overrides": {"tensor_parallel_size": {"choices": [1, 2]}},
                           "constraints": [rule({"tensor_parallel_size": 4})]}))

