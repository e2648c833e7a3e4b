"""Knobs a space file marks `minor` (tpe-coord moves them after every other knob; docs/search.md)."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution, IntDistribution

from tests.search.helpers import lever_value, make_study, mixed_knobs, tell_lever_start, tell_moves
from tuner.search.coord import CoordTPESampler
from tuner.search.coord_polish import CoordPolishSampler
from tuner.search.searcher import make_sampler
from tuner.search.space import build_space


def test_the_files_mark_the_minor_knobs_and_a_study_can_change_them() -> None:
    space = build_space(make_study(engine="sim"))
    assert space.minor() == {"sim.block_size", "sim.scheduling_policy", "sim.enable_prefix_caching",
                             "sim.stream_interval"}
    assert "sim.block_size: categorical [16, 32] default=16 (minor)" in space.describe()
    over = {"overrides": {"stream_interval": {"minor": False}, "max_num_partial_prefills": {"minor": True}}}
    space = build_space(make_study(engine="sim", search_space=over))
    assert "sim.stream_interval" not in space.minor() and "sim.max_num_partial_prefills" in space.minor()
    assert build_space(make_study(engine="sglang")).minor() == {"sglang.page_size"}


def _moves(sampler: CoordTPESampler, n: int) -> list[str]:
    """Told start where c = "b" doubles the objective (the best trial has c = "a"), then `n` guided trials, each
    a move; returns the knob each move changed."""
    return [move[0] for _, move in tell_moves(sampler, n) if move is not None]


@pytest.mark.parametrize("make", [
    lambda minor: CoordTPESampler(seed=0, n_startup_trials=0, move_share=1.0, thompson=False, minor=minor),
    lambda minor: CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, untested=1.0,
                                     near_fail=3.0, flat_interval=False, sweep="none", polish=0, minor=minor),
], ids=["coord", "polish-untested"])
def test_a_minor_knob_is_moved_after_the_knobs_not_yet_found_flat(make) -> None:  # type: ignore[no-untyped-def]
    """c is the lever that pays: unmarked, it is moved before some knob that does nothing here (n, f, p). Marked
    minor, each of those is moved first, and c still comes before the move that loses (b -> True)."""
    unmarked = _moves(make(frozenset()), 8)
    assert not {"n", "f", "p"} <= set(unmarked[:unmarked.index("c")]), unmarked
    moves = _moves(make(frozenset({"c"})), 8)
    first_c = moves.index("c")
    assert {"n", "f", "p"} <= set(moves[:first_c]), moves
    assert "b" not in moves[:first_c], moves


def test_halves_move_a_linear_count_to_half_and_twice_its_value() -> None:
    """A draft length at 16 of 1-16 reaches 8 in one move (+- 1/4 and 1/8 of the range reach only 12 and 14)."""
    d = IntDistribution(1, 16)
    assert 8 not in CoordPolishSampler.chosen()._move_values(d, 16)
    halves = CoordPolishSampler.chosen(halves=True)
    assert 8 in halves._move_values(d, 16) and {4, 16} <= set(halves._move_values(d, 8))
    assert set(halves._move_values(IntDistribution(16, 1024, log=True), 64)) == {256, 16, 128, 32}  # log: as before


def test_the_default_sampler_tpe_coord_reads_the_minor_knobs_of_its_space() -> None:
    study = make_study(engine="sim", search={"n_startup_trials": 4})
    assert study.search.algorithm == "tpe-coord"
    space = build_space(study)
    sampler = make_sampler(study, space)
    assert isinstance(sampler, CoordPolishSampler) and sampler.halves
    assert sampler.minor == space.minor() and "sim.block_size" in sampler.minor
    assert sampler.relief == space.memory() and {"sim.max_num_seqs", "sim.max_cudagraph_capture_size"} <= sampler.relief


def test_fine_steps_wait_for_the_coarse_ones() -> None:
    """`fine` (search40, not what tpe-coord builds): x2 on a log range and steps under 1/5 of a linear one are
    fine; with the penalty every numeric knob's coarse moves come before its fine ones, without it they mix."""
    from tuner.search.bracket import fine_step as _fine_step

    log, lin = IntDistribution(16, 1024, log=True), IntDistribution(1, 16)
    assert _fine_step(log, 64, 128) and _fine_step(log, 64, 32) and not _fine_step(log, 64, 256)
    assert _fine_step(lin, 8, 10) and not _fine_step(lin, 8, 4) and not _fine_step(lin, 16, 12)
    dists = {"n": log, "f": FloatDistribution(0.8, 0.97, step=0.01), "p": IntDistribution(1, 4)}

    def fine_then_coarse(fine: float) -> list[str]:
        """The numeric knobs with a fine move before a coarse one, over 12 moves of the told start."""
        sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, near_fail=3.0,
                                     flat_interval=False, sweep="none", polish=0, fine=fine)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        tell_lever_start(study)
        kinds: dict[str, list[bool]] = {}
        for _ in range(12):
            trial = study.ask()
            params = mixed_knobs(trial)
            knob = sampler.moves[trial.number][0]
            if knob in dists:
                kinds.setdefault(knob, []).append(_fine_step(dists[knob], sampler._moved_from[trial.number],
                                                             params[knob]))
            trial.set_constraint("sla", -0.1)
            study.tell(trial, lever_value(params))
        assert {"n", "f"} <= set(kinds), kinds
        return [k for k, seq in kinds.items() if seq != sorted(seq)]

    assert fine_then_coarse(0.5) == []
    assert "n" in fine_then_coarse(0.0)  # x4, x2, /4: a fine step before a coarse one without the penalty
