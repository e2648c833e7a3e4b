"""The mixed study every report test draws from (helpers in report_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_fixtures import make_trial

from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult


@pytest.fixture()
def study_trials(tmp_path: Path) -> list[TrialResult]:
    """A small mixed study: baseline, feasible configs (two on the front), SLA-violated, OOM, start failure."""
    ok = TrialOutcome.OK
    return [
        make_trial(tmp_path, 0, ok, tput=1000, p99=300, baseline=True, params={},  # engine defaults
                   resolved={"max_num_seqs": 256, "block_size": 16, "enable_chunked_prefill": True}),
        make_trial(tmp_path, 1, ok, tput=1800, p99=420,
                   params={"max_num_seqs": 512, "block_size": 32, "enable_chunked_prefill": True}),
        make_trial(tmp_path, 2, ok, tput=1500, p99=200,
                   params={"max_num_seqs": 128, "block_size": 16, "enable_chunked_prefill": False}),
        make_trial(tmp_path, 3, ok, tput=1400, p99=450,  # dominated by trial 1 and trial 2
                   params={"max_num_seqs": 384, "block_size": 32, "enable_chunked_prefill": False}),
        make_trial(tmp_path, 4, TrialOutcome.SLA_VIOLATED, tput=2500, p99=900, reason="p99_ttft_ms 900 > 500 at lowest load",
                   params={"max_num_seqs": 1024, "block_size": 16, "enable_chunked_prefill": True}),
        make_trial(tmp_path, 5, TrialOutcome.OOM, reason="KV cache does not fit: 0.4 GiB free",
                   params={"max_num_seqs": 2048, "block_size": 32, "enable_chunked_prefill": True}),
        make_trial(tmp_path, 6, TrialOutcome.START_FAILED, reason="engine exited with status 1",
                   params={"max_num_seqs": 64, "block_size": 8}),
    ]
