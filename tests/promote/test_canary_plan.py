"""The canary's load: at or below the confirmed SLA capacity, from the study or the command line."""

from __future__ import annotations

import pytest
from promote_factory import make_study
from pydantic import ValidationError

from tuner.common.errors import SpecError
from tuner.promote.canary import plan


def test_the_default_canary_is_a_fraction_of_the_confirmed_capacity() -> None:
    p = plan(make_study(), 8.0)
    assert (p.load, p.seconds, p.mode) == (pytest.approx(6.4), 30, "rate")
    p = plan(make_study(promotion={"canary": {"seconds": 5, "load_fraction": 0.5}}), 8.0)
    assert (p.load, p.seconds) == (4.0, 5)
    conc = make_study(capacity={"mode": "concurrency"}, promotion={"canary": {"load_fraction": 0.5}})
    assert plan(conc, 7.0).load == 3.0  # whole streams, rounded down
    assert conc.capacity.low == 1  # a concurrency search starts at one stream unless told
    assert plan(make_study(), 8.0, load=8.0, seconds=2).load == 8.0  # at the capacity is allowed


def test_a_canary_above_the_capacity_or_without_one_is_refused() -> None:
    with pytest.raises(SpecError, match="above the confirmed SLA capacity 8"):
        plan(make_study(), 8.0, load=9.0)
    with pytest.raises(SpecError, match="no SLA capacity"):
        plan(make_study(), None)
    with pytest.raises(SpecError, match="> 0 s"):
        plan(make_study(), 8.0, seconds=0)
    with pytest.raises(ValidationError, match="load_fraction"):
        make_study(promotion={"canary": {"load_fraction": 1.5}})
    with pytest.raises(ValidationError, match="extra"):
        make_study(promotion={"canary": {"rate": 3}})  # strict: an unknown key is an error
