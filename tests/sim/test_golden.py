"""The simulator's records for fixed cases are bit-identical to those of the code before its speed work.

A failure here means a change moved simulated records. If that was the point (a refit, a new cost
term), re-run `python tests/sim/golden.py --write` and say so in the commit; if it was meant to be a
pure speed-up, it is a bug.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.sim.golden import CASES, GOLDEN, digest, run_case

WANT = json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_records_identical_to_golden(name: str) -> None:
    assert digest(run_case(name)) == WANT[name]


def test_digest_sees_a_one_ulp_change() -> None:
    recs = run_case("vllm_eager_closed")
    before = digest(recs)
    recs[3].token_times[-1] = math.nextafter(recs[3].token_times[-1], math.inf)
    assert digest(recs) != before
