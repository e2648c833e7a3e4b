"""What `--resume` finds in the output folder is checked before anything is written there.

A folder of another study, a truncated state.json or an unreadable trials.parquet is bad input (exit 2):
resuming over it would rewrite another study's state or lose its finished trials.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.common.atomic import read_table
from tuner.common.errors import SpecError

if TYPE_CHECKING:
    from tuner.spec.study import Study

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


# What a trial's numbers depend on: a resumed study that changed one of these would rank trials measured
# two ways. Budget, resources, timeouts, interpreters, the sampler, tracking and promotion may change.
_MEASURED = {"engine": None, "model": ("name", "shape", "max_model_len", "dtype", "tensor_parallel_size", "load_format"),
             "allow": None, "speculative": None, "sim": ("flavour", "gpu", "faults"), "search_space": None,
             "workload": None, "capacity": ("mode", "low", "high", "tolerance", "max_points", "requests_per_point",
                                            "duration_s"), "sla": None, "objective": None}


def measured(study: Study) -> dict[str, str]:
    """{section: short hash} of the parts of the study its measurements depend on (kept in state.json)."""
    data = study.model_dump(mode="json", by_alias=True)
    out = {}
    for key, fields in _MEASURED.items():
        value = data.get(key)
        if fields is not None and isinstance(value, dict):
            value = {f: value.get(f) for f in fields}
        out[key] = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return out


def check_resume(out: Path, study: Study, study_path: Path) -> dict[str, Any]:
    """The state a resume continues from, after checking that it is this study's, measured the same way,
    and readable."""
    state = read_state(out)
    study_name = study.name
    other = state.get("study_name")
    if other is not None and other != study_name:
        raise SpecError(f"output folder {out} holds study {other!r}, not {study_name!r}", "--resume",
                        f"give that study's file, or choose another --output for {study_name!r}")
    before = state.get("measured")
    if isinstance(before, dict):  # state files from before this check have none
        now = measured(study)
        changed = sorted(k for k in now if k in before and before[k] != now[k])
        if changed:
            raise SpecError(f"{study_path} changed since the study started: {', '.join(changed)} (the finished "
                            "trials were measured under the old settings, so they would not compare)", "--resume",
                            f"undo the change to {', '.join(changed)} (budget, resources, timeouts, the sampler, "
                            "tracking and promotion may change), or run the changed study in another --output")
    trials = out / TRIALS
    if trials.exists():
        try:
            table = read_table(trials)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise SpecError(f"{trials} cannot be read ({type(exc).__name__}: {str(exc)[:200]})", "--resume",
                            "restore it from a backup (or MLflow's copy), or start afresh in another --output"
                            ) from None
        if "trial_id" not in table.column_names or "outcome" not in table.column_names:
            raise SpecError(f"{trials} is not a servetune trials table (no trial_id/outcome columns)", "--resume",
                            "restore it from a backup, or start afresh in another --output")
    return state


def stored_uri(out: Path) -> str:
    """The tracking URI a study to resume was recorded in (state.json keeps it without credentials), or ""
    for the folder's own SQLite store: a resume must log to the store that holds its parent run, and the
    printed `--resume` command names no URI. An output folder's own store is never taken from state.json (a
    moved or copied folder would log into the original's)."""
    try:
        uri = read_state(out).get("tracking_uri")
    except SpecError:
        return ""  # check_resume reports it
    if not isinstance(uri, str) or not uri:
        return ""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.exists() or (db.parent / STATE).exists():
            return ""
    return uri

