"""The search benchmark scores what a trial launches: speculative settings arrive as one `speculative_config`
dict in the launch args and must reach the landscape as its knobs (before Oracle.unfold every speculative config
was scored as speculative decoding off)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import benchmarks.search_grid as search_grid
from benchmarks.search_efficiency import ROOT, Oracle, load_study
from benchmarks.search_grid import Grid
from tuner.search.space import build_space


def test_launch_args_unfold_into_the_landscape_knobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_grid, "CACHE_DIR", tmp_path)  # the grid cache out of the repository
    a = argparse.Namespace(levers="spec", requests_per_point=60, duration_s=6.0, max_points=8)
    study = load_study("static", 0, 30, a)
    space = build_space(study, ROOT / "studies")
    grid = Grid("test-unfold", study, space.engines[study.engine_names[0]], {}, log=lambda _: None)
    oracle = Oracle(grid, space)
    draft = "z-lab/Qwen3-8B-DFlash-b16"
    args = {"max_num_seqs": 256, "speculative_config": {"method": "dflash", "num_speculative_tokens": 4, "model": draft}}
    knobs = oracle.unfold(args)
    assert knobs["speculative_config.method"] == "dflash"
    assert knobs["speculative_config.num_speculative_tokens"] == 4
    assert "speculative_config.model" not in knobs  # the draft is the study's, not a searched knob
    assert knobs["max_num_seqs"] == 256
    # the landscape point differs from the same config without speculative decoding
    assert grid.point(knobs) != grid.point({"max_num_seqs": 256})
