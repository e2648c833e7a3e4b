"""`python -m tuner.trial.worker`: one trial in its own process, for the local executor (tuner.run.local_executor).

The job (study data, plan, folders) arrives as JSON on stdin, never in a file: engine env values in the
study may be secrets. The result goes to `<trial dir>/result.json` (atomic), which the driver reads once
the process has exited; a process that dies or hangs leaves none, and the driver fails that trial.
SIGTERM (the driver stopping a study) unwinds normally, so the engine server is stopped too.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

RESULT = "result.json"


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # through `with engine.server(...)`: the server is stopped on the way out


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    from tuner.common.atomic import write_json
    from tuner.spec.load import validate
    from tuner.spec.study import Study
    from tuner.trial.runner import TrialPlan, run_trial

    job = json.loads(sys.stdin.read())
    study = validate(Study, job["study"], "study")
    plan = TrialPlan(**job["plan"])
    tdir = Path(job["trial_dir"])
    result = run_trial(study, plan, tdir, base_dir=Path(job["base_dir"]))
    write_json(tdir / RESULT, result.to_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
