"""StudyProgress: plain log lines off a terminal, a rich live view on one (a real pseudo-terminal)."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

from report_fixtures import make_trial

from tuner.run.progress import StudyProgress
from tuner.trial.outcome import TrialOutcome

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """Deterministic time so 'time left' is checkable."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_when_not_a_tty(tmp_path: Path) -> None:
    out, clock = io.StringIO(), FakeClock()
    base = make_trial(tmp_path, 0, TrialOutcome.OK, tput=1000, p99=300, baseline=True)
    better = make_trial(tmp_path, 1, TrialOutcome.OK, tput=1500, p99=400, params={"max_num_seqs": 512})
    oom = make_trial(tmp_path, 2, TrialOutcome.OOM, reason="KV cache does not fit")
    with StudyProgress(4, 600, stream=out, clock=clock) as progress:
        progress.trial_started("t000", "sim", {})
        progress.trial_started("t001", "sim", {"max_num_seqs": 512})
        assert progress.summary_line().startswith("done 0/4, running 2, failed 0, best: none feasible yet")
        clock.now += 90
        progress.trial_finished(base)
        progress.trial_finished(better)
        progress.trial_started("t002", "sim", {"max_num_seqs": 4096})
        clock.now += 30
        progress.trial_finished(oom)
        assert progress.ratio_to_baseline() == 1.5
        assert progress.time_left_s() == 480
    lines = out.getvalue().splitlines()
    assert "\x1b[" not in out.getvalue()
    assert lines[0] == "[servetune] trial t000 started (sim)"
    assert lines[1] == "[servetune] trial t001 started (sim) max_num_seqs=512"
    assert "trial t001 ok output_throughput=1500 capacity=15" in lines[3]
    assert lines[3].endswith("done 2/4, running 0, failed 0, best 1500 (trial t001, 1.50x baseline), time left 8m30s")
    assert "trial t002 oom KV cache does not fit | done 3/4, running 0, failed 1" in lines[5]
    assert lines[-1] == ("[servetune] study finished: done 3/4, running 0, failed 1, "
                         "best 1500 (trial t001, 1.50x baseline), time left 8m00s")


def test_infeasible_baseline_has_no_ratio(tmp_path: Path) -> None:
    out = io.StringIO()
    p = StudyProgress(2, None, stream=out)
    p.trial_finished(make_trial(tmp_path, 0, TrialOutcome.SLA_VIOLATED, tput=10, p99=900, baseline=True))
    p.trial_finished(make_trial(tmp_path, 1, TrialOutcome.OK, tput=20, p99=100))
    assert p.ratio_to_baseline() is None
    assert p.summary_line() == "done 2/2, running 0, failed 0, best 20 (trial t001)"


def test_resume_counts_trials_finished_before(tmp_path: Path) -> None:
    out = io.StringIO()
    p = StudyProgress(5, None, stream=out)
    before = [make_trial(tmp_path, 0, TrialOutcome.OK, tput=100, p99=100, baseline=True),
              make_trial(tmp_path, 1, TrialOutcome.OOM, reason="oom")]
    p.restore(before)
    p.restore(before)  # idempotent
    p.trial_finished(make_trial(tmp_path, 2, TrialOutcome.OK, tput=150, p99=100))
    assert len(out.getvalue().splitlines()) == 2
    assert out.getvalue().splitlines()[0] == (
        "[servetune] resumed with 2 finished trial(s) | done 2/5, running 0, failed 1, best 100 (trial t000, 1.00x baseline)")
    assert p.summary_line() == "done 3/5, running 0, failed 1, best 150 (trial t002, 1.50x baseline)"


_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from report_fixtures import make_trial
    from tuner.trial.outcome import TrialOutcome
    from tuner.run.progress import StudyProgress
    with StudyProgress(3, 3600) as p:
        p.trial_started("t000", "sim", {{"max_num_seqs": 256}})
        time.sleep(0.8)
        p.trial_finished(make_trial(Path({tmp!r}), 0, TrialOutcome.OK, tput=1234, p99=300, baseline=True))
        time.sleep(0.8)
""")


def _run(tmp_path: Path, tty: bool) -> str:
    code = _SCRIPT.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TERM": "xterm-256color"}
    if not tty:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              timeout=60, check=True).stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO once the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode(errors="replace")


def test_live_view_on_a_real_terminal_and_plain_lines_on_a_pipe(tmp_path: Path) -> None:
    live = _run(tmp_path, tty=True)
    assert "\x1b[" in live  # cursor movement / styling: rich redrew the view
    assert "running trials" in live and "last finished" in live
    assert "best 1234 (trial t000, 1.00x baseline)" in live
    plain = _run(tmp_path, tty=False)
    assert "\x1b[" not in plain and "running trials" not in plain
    assert plain.splitlines()[0] == "[servetune] trial t000 started (sim) max_num_seqs=256"


def test_a_study_stopped_by_ctrl_c_ends_with_stopped_not_finished(tmp_path: Path) -> None:
    """Seen in the audit: Ctrl-C mid-study printed 'study finished: done 6/30, running 1' (the trial was stopped)."""
    import signal

    from tuner.search.signals import Interrupt

    out = io.StringIO()
    Interrupt.reset()
    try:
        with StudyProgress(30, None, stream=out) as progress:
            progress.trial_started("t000", "sim", {})
            progress.trial_finished(make_trial(tmp_path, 0, TrialOutcome.OK, tput=1000, p99=300, baseline=True))
            progress.trial_started("t001", "sim", {"max_num_seqs": 512})
            Interrupt.signum = signal.SIGINT
    finally:
        Interrupt.reset()
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("[servetune] study stopped by Ctrl-C (SIGINT): done 1/30, running 0"), last
    assert last.endswith("; 1 trial(s) were running when it stopped"), last
