"""TPE that spends every third guided trial on a neighbour of the incumbent (`search.algorithm: tpe-local`).

Why: on the levers space (benchmarks/search_efficiency.py) a few knobs decide most of the objective
(FP8 weights and KV cache, chunked prefill, the CUDA-graph size, the token budget) and random search
finds that basin within about 10 trials. What separates the basin from the optimum is then one or two
knobs whose right value depends on the others (chunked prefill off only pays with CUDA graphs up to
2048 and FP8; graphs to 1024 only with 1024 sequences). Independent TPE models each knob on its own
from the top ~10 % of 20-30 trials (2-3 configs), so it re-samples the basin's marginals and rarely tries
the one-knob change that completes it; neither does random search. A neighbour move does: copy the best
SLA-feasible trial and change one or two knobs by a large step (another choice; a quarter of a linear
range; a factor of 4 on a log scale). Repeats cost nothing: the searcher skips duplicates before launch.

It uses only the trials it is told (no simulator, no knowledge of the benchmark's levels). Conditional
knobs a move switches on (e.g. partial prefills once chunked prefill is on) are drawn by TPE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optuna.samplers import TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from tuner.search.planned import PlannedSampler, incumbent, movable, move


class LocalTPESampler(PlannedSampler):
    """Independent TPE; after `n_startup_trials`, every `local_every`-th trial (3: chosen over 2 on the
    benchmark's seeds 0-9 and confirmed at 30 trials on seeds 10-19) is a neighbour of the
    incumbent with `max_changes` knobs (1 or 2, drawn) moved; the knobs it leaves alone keep the
    incumbent's values.

    `multivariate`: grouped multivariate TPE underneath (the benchmark's `local-mv`: on the lever space with
    speculative decoding it won seeds 0-9 but tied tpe-local on held-out seeds, docs/search.md; not a
    study setting). `tpe_options` pass Optuna TPE settings through; `parents` + `branch_every` make every
    k-th move switch one parent knob only (tried on seeds 0-9, worse; off by default)."""

    def __init__(self, *, seed: int | None = None, n_startup_trials: int = 8, local_every: int = 3,
                 max_changes: int = 2, constant_liar: bool = True, multivariate: bool = False,
                 tpe_options: dict[str, Any] | None = None, parents: Sequence[str] = (),
                 branch_every: int = 0) -> None:
        self._tpe = TPESampler(seed=seed, n_startup_trials=n_startup_trials, constant_liar=constant_liar,
                               multivariate=multivariate, group=multivariate, **(tpe_options or {}))
        super().__init__(self._tpe, seed)
        self.n_startup_trials, self.local_every, self.max_changes = n_startup_trials, local_every, max_changes
        # branch moves: every `branch_every`-th neighbour move switches one parent knob (one that turns
        # conditional knobs on or off, e.g. the speculative method) to another choice and nothing else
        self.parents, self.branch_every, self._moves = set(parents), branch_every, 0

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._tpe.before_trial(study, trial)
        if "fixed_params" in trial.system_attrs:  # enqueued (a baseline, a warm start): nothing to plan
            return
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(done) < self.n_startup_trials:
            return
        # launched trials since the startup (skipped ones are FAIL and do not count, so a duplicate
        # neighbour is replaced by another neighbour, not by a TPE draw)
        running = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                   if t.number != trial.number]
        if (len(done) + len(running) - self.n_startup_trials) % self.local_every != self.local_every - 1:
            return
        best = incumbent(study, done)
        if best is not None:
            self._plans[trial.number] = self._neighbour(best)

    def _neighbour(self, best: FrozenTrial) -> dict[str, Any]:
        names = [n for n, d in best.distributions.items() if movable(d)]
        if not names:
            return {}
        self._moves += 1
        branch = [n for n in names if n in self.parents]
        if branch and self.branch_every and self._moves % self.branch_every == 0:
            p = branch[int(self._rng.randint(len(branch)))]
            # the knobs the new branch switches on are not in the plan: TPE draws them
            return {n: (move(best.distributions[n], v, self._rng) if n == p else v) for n, v in best.params.items()}
        k = min(len(names), int(self._rng.randint(1, self.max_changes + 1)))
        moved = set(self._rng.choice(names, size=k, replace=False).tolist())
        return {n: (move(best.distributions[n], v, self._rng) if n in moved else v)
                for n, v in best.params.items()}

