"""No input crashes servetune: one-leaf mutations of the default study and of the built-in vLLM space end in
exit 0 or a clean exit 2 (fuzz_inputs.py; run it with --all for every study and space file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_inputs import ROOT, broken, fuzz_space, fuzz_study

# a few of each kind: empty, text, negative, infinity, beyond any count, a container, a path too long to exist
VALUES = [None, "", "x", -1, float("inf"), 10**30, [1, 2], "a" * 5000]


@pytest.mark.parametrize("kind", ["study", "space"])
def test_no_input_crashes(kind: str, tmp_path: Path) -> None:
    study = ROOT / "studies" / "default.yaml"
    outcomes = list(fuzz_study(study, tmp_path, VALUES) if kind == "study"
                    else fuzz_space(ROOT / "search_spaces" / "vllm.yaml", study, tmp_path, VALUES))
    assert len(outcomes) > 100
    bad = broken(outcomes)
    assert not bad, "\n".join(f"{o.where} = {o.value}: exit {o.rc}: {o.tail}" for o in bad[:20])
    assert sum(o.rc == 2 for o in outcomes) > len(outcomes) / 2  # most wrong kinds are refused, not accepted
