"""docs/study.md's annotated example is what users copy: it must validate as written."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tuner.search.space import build_space
from tuner.spec.study import Study

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_study_example_validates() -> None:
    block = re.search(r"```ya?ml\n(.*?)```", (ROOT / "docs" / "study.md").read_text(), re.S)
    assert block is not None
    st = Study.model_validate(yaml.safe_load(block.group(1)))
    assert st.output_check == "off"  # a bare `off` is YAML 1.1's false: taken as the word (was refused)
    build_space(st, ROOT / "studies")


def test_yaml_on_off_words_are_the_output_check_modes() -> None:
    data = yaml.safe_load((ROOT / "studies" / "default.yaml").read_text())
    for word, mode in (("off", "off"), ("on", "required"), ("required", "required")):
        assert Study.model_validate({**data, **yaml.safe_load(f"output_check: {word}")}).output_check == mode
