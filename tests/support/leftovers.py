"""What a run (or a compose project, labelled the same way) left in the Docker engine."""

from __future__ import annotations

import docker

from harness.containers.cluster import LABEL_RUN


def leftovers(client: docker.DockerClient, run_id: str) -> list[str]:
    """The containers, networks and volumes labelled with `run_id` that still exist."""
    selector = {"label": f"{LABEL_RUN}={run_id}"}
    return ([c.name for c in client.containers.list(all=True, filters=selector)]
            + [n.name for n in client.networks.list(filters=selector)]
            + [v.name for v in client.volumes.list(filters=selector)])
