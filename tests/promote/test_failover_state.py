"""The failover router's per-side state: what trips a side and what brings it back."""

from __future__ import annotations

import time

from serve_apps.failover import SideState


def test_a_good_probe_does_not_bring_a_tripped_side_back_early() -> None:
    """A primary whose /v1/models answers while every completion fails (seen in the Serve test):
    the health loop's good probes must not undo the trip that the failed requests caused."""
    side = SideState()
    for _ in range(3):
        side.failed(trip=3, retry_after_s=30.0)
    assert not side.healthy
    side.probe_ok()
    assert not side.healthy and side.failures == 3


def test_a_side_in_service_forgets_failures_on_a_good_probe_or_answer() -> None:
    side = SideState()
    side.failed(trip=3, retry_after_s=30.0)
    side.probe_ok()
    assert side.healthy and side.failures == 0
    for _ in range(3):
        side.failed(trip=3, retry_after_s=0.01)
    time.sleep(0.02)
    assert side.healthy  # retry_after_s passed: tried again
    side.ok()
    assert side.failures == 0
