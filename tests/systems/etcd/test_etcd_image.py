"""The etcd image's recipe and name (systems/etcd/image.py, harness.containers.image.SystemImage); the built
image's label and version."""

from __future__ import annotations

import dataclasses

import docker  # type: ignore[import-untyped]
import pytest

from harness.containers.cluster import LABEL_RUN
from harness.containers.image import LABEL_SOURCES
from systems.etcd import image


def test_the_build_context_holds_the_recipe_the_sshd_files_and_the_agents() -> None:
    names = [name for name, _ in image.ETCD.files()]
    assert {"Dockerfile", "install-etcd.sh", "sshd_config", "entrypoint.sh"} <= set(names)
    assert any(name.startswith("agents/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)


def test_the_hash_follows_the_base_and_the_pinned_version() -> None:
    one = image.ETCD.sources("sha256:aaa")
    assert one == image.ETCD.sources("sha256:aaa")
    assert one != image.ETCD.sources("sha256:bbb")
    assert one != dataclasses.replace(image.ETCD, version="3.4.23-4+b5").sources("sha256:aaa")


@pytest.mark.docker
def test_the_image_is_labelled_with_its_hash_and_runs_the_pinned_etcd(docker_client: docker.DockerClient,
                                                                       etcd_image: str) -> None:
    built = docker_client.images.get(etcd_image)
    assert etcd_image.startswith(f"{image.ETCD_REPO}:")
    assert built.labels[LABEL_SOURCES].startswith(etcd_image.split(":")[1])
    container = docker_client.containers.create(  # labelled: `harness clean` finds it after a crash
        etcd_image, ["/usr/bin/etcd", "--version"], labels={LABEL_RUN: "etcd-image-test"})
    try:
        container.start()
        assert container.wait(timeout=60)["StatusCode"] == 0
        assert b"etcd Version: 3.4.23" in container.logs()
    finally:
        container.remove(force=True)
