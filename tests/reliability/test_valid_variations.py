"""Valid studies must build: the other side of the bad-input corpus. Every search-space parameter of each
engine's file is narrowed, widened, excluded, fixed and named in a constraint's `if` by a study, as users do;
each variation must validate and build its space. Two such studies were refused as bad input before
(a condition on a widened choice; narrowed speculative methods)."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from tuner.search.space import build_space
from tuner.spec.study import Study

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "studies" / "default.yaml").read_text())
LEVERS = ["fp8_weights", "fp8_kv_cache", "speculative_decoding"]
ENGINES = {"sim": "vllm.yaml", "vllm": "vllm.yaml", "sglang": "sglang.yaml"}


def variations(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, search_space section) pairs a user could write for these parameters."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, p in params.items():
        out.append((f"{name} excluded", {"exclude": [name]}))
        if p.get("default") is not None:
            out.append((f"{name} fixed", {"fixed": {name: p["default"]}}))
        if p["type"] == "categorical":
            ch = p["choices"]
            for k in range(1, len(ch) + 1):
                for sub in itertools.combinations(ch, k):
                    ov = {"choices": list(sub), **({} if p.get("default") in sub else {"default": sub[0]})}
                    out.append((f"{name} choices {list(sub)}", {"overrides": {name: ov}}))
            extra = max(c for c in ch if isinstance(c, int)) * 2 if all(isinstance(c, int) for c in ch) else None
            for c in [*ch, *([extra] if extra is not None else [])]:
                rule = {"require": "max_model_len >= 1", "if": {name: c}, "action": "reject", "why": "a study's rule"}
                ss: dict[str, Any] = {"constraints": [rule]}
                if c == extra:
                    ss["overrides"] = {name: {"choices": [*ch, extra]}}
                out.append((f"if {name} = {c}", ss))
        elif p["type"] in ("int", "float"):
            lo, hi = p["low"], p["high"]
            mid = int((lo + hi) // 2) if p["type"] == "int" else round((lo + hi) / 2, 2)
            for ov in ({"low": mid}, {"high": mid}, {"low": lo, "high": lo}):
                out.append((f"{name} range {ov}", {"overrides": {name: ov}}))
        else:
            out += [(f"{name} default {v}", {"overrides": {name: {"default": v}}}) for v in (True, False)]
    return out


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_study_variation_of_the_space_builds(engine: str) -> None:
    params = yaml.safe_load((ROOT / "search_spaces" / ENGINES[engine]).read_text())["params"]
    refused = []
    for allow in ([], LEVERS):
        for label, ss in variations(params):
            data = copy.deepcopy(BASE)
            data.update(engine=engine, search_space=ss, allow=allow)
            if engine != "sim":
                data["engines"] = {engine: {"check_args": False}}
            try:
                build_space(Study.model_validate(data))
            except Exception as exc:  # noqa: BLE001 - every refusal is collected and shown
                refused.append(f"{label} (allow={allow}): {exc}")
    assert not refused, "\n".join(refused[:10])
