"""What `--resume` finds in the output folder is checked before anything is written there.

A folder of another study, a truncated state.json or an unreadable trials.parquet is bad input (exit 2):
resuming over it would rewrite another study's state or lose its finished trials.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError

STATE = "state.json"
TRIALS = "trials.parquet"


def read_state(out: Path) -> dict[str, Any]:
    """state.json as a dict ({} when absent); a file that is not a JSON object is a SpecError."""
    path = out / STATE
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path} is not valid JSON (truncated or corrupt: {exc})", "--resume",
                        "restore the file from a backup, or start the study afresh in another --output") from None
    if not isinstance(state, dict) or not isinstance(state.get("parent_run_id"), str):
        raise SpecError(f"{path} lacks the study's MLflow run id (not a servetune state file?)", "--resume",
                        "restore the file from a backup, or start the study afresh in another --output")
    return state


def check_resume(out: Path, study_name: str, study_path: Path) -> dict[str, Any]:
    """The state a resume continues from, after checking that it is this study's and readable."""
    state = read_state(out)
    other = state.get("study_name")
    if other is not None and other != study_name:
        raise SpecError(f"output folder {out} holds study {other!r}, not {study_name!r}", "--resume",
                        f"give that study's file, or choose another --output for {study_name!r}")
    trials = out / TRIALS
    if trials.exists():
        try:
            import pyarrow.parquet as pq

            table = pq.read_table(trials)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise SpecError(f"{trials} cannot be read ({type(exc).__name__}: {str(exc)[:200]})", "--resume",
                            "restore it from a backup (or MLflow's copy), or start afresh in another --output"
                            ) from None
        if "trial_id" not in table.column_names or "outcome" not in table.column_names:
            raise SpecError(f"{trials} is not a servetune trials table (no trial_id/outcome columns)", "--resume",
                            "restore it from a backup, or start afresh in another --output")
    return state
