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


def test_good_probes_between_sparse_failed_requests_do_not_reset_their_count() -> None:
    """The CI flake: requests failed one at a time with a good probe in between each, and the
    side never tripped because each probe set the count back to zero."""
    side = SideState()
    for _ in range(3):
        assert side.healthy
        side.failed(trip=3, retry_after_s=30.0)
        side.probe_ok()
    assert not side.healthy and side.request_failures == 3


def test_failed_probes_trip_a_side_and_a_good_probe_clears_only_them() -> None:
    side = SideState()
    side.failed(trip=3, retry_after_s=30.0, probe=True)
    side.failed(trip=3, retry_after_s=30.0)
    side.probe_ok()
    assert side.healthy and side.probe_failures == 0 and side.request_failures == 1
    for _ in range(3):
        side.failed(trip=3, retry_after_s=30.0, probe=True)
    assert not side.healthy and side.failures == 3


def test_a_good_answer_clears_everything_and_a_trip_expires() -> None:
    side = SideState()
    for _ in range(3):
        side.failed(trip=3, retry_after_s=0.01)
    time.sleep(0.02)
    assert side.healthy  # retry_after_s passed: tried again
    side.ok()
    assert side.failures == 0 and side.healthy
