"""One real Ray head with token auth, shared by the cluster tests (starting one costs ~15 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.ray_head import RayHead, start_head


@pytest.fixture(scope="session")
def head() -> Iterator[RayHead]:
    h = start_head(num_cpus=2, num_gpus=4)
    try:
        yield h
    finally:
        h.stop()
