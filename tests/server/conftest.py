"""A loopback local-cluster fixture: `local_cluster(size, *serve_args)` starts node processes.

Every cluster the fixture made is killed at the end of the test (no process is left).
Others may reuse it: `from tests.support.localcluster import LocalCluster` is the same thing without
pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.localcluster import LocalCluster

SMALL_SEGMENTS = ("--segment-mb", "4")


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    clusters: list[LocalCluster] = []

    def start(size: int = 3, *serve_args: str) -> LocalCluster:
        cluster = LocalCluster(tmp_path / f"cluster{len(clusters)}", size,
                               extra_args=[*SMALL_SEGMENTS, *serve_args])
        clusters.append(cluster)
        cluster.start_all()
        return cluster
    yield start
    for cluster in clusters:
        cluster.close()
