"""`ha_cluster(size, master_role, *serve_args)`: master-slave node processes on loopback.

n1 is the master with `master_role`, the others its slaves; fast HA timings unless the
test passes its own. Every cluster is killed at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.localcluster import Clusters, LocalCluster

FAST_HA = ("--segment-mb", "4", "--report-interval-ms", "100", "--ha-heartbeat-ms", "50")


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    clusters = Clusters(tmp_path, FAST_HA)

    def start(size: int = 2, master_role: str = "SYNC_MASTER", *serve_args: str) -> LocalCluster:
        return clusters.start(size, *serve_args, master_role=master_role)
    yield start
    clusters.close()
