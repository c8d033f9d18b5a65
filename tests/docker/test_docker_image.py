"""The images: built with no registry, labelled by recipe and sources, reused while nothing changed."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from harness.containers import image
from harness.containers.cluster import connect
from harness.errors import EngineUnavailable

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.docker
def test_client_negotiates_the_engines_api_version(docker_client: docker.DockerClient) -> None:
    assert docker_client.api.api_version == docker_client.version()["ApiVersion"]


@pytest.mark.docker
def test_images_are_labelled_with_their_hashes(docker_client: docker.DockerClient, node_image: str) -> None:
    node = docker_client.images.get(node_image)
    assert node.labels[image.LABEL_SOURCES].startswith(node_image.split(":")[1])
    recipe = image.files_hash(image.recipe_files())
    base = docker_client.images.get(f"{image.BASE_REPO}:{recipe[:12]}")
    assert base.labels[image.LABEL_RECIPE] == recipe


@pytest.mark.docker
def test_node_image_is_reused_until_the_sources_change(docker_client: docker.DockerClient, node_image: str,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    sources = tmp_path / "nodes"
    shutil.copytree(REPO / "nodes", sources, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(image, "NODES_DIR", sources)
    first = image.ensure_images(docker_client, log=lambda line: None)
    built: list[str] = []
    assert image.ensure_images(docker_client, log=built.append) == first
    assert built == [line for line in built if "up to date" in line]  # nothing was built again
    (sources / "marker.py").write_text("MARK = 1\n")
    second = image.ensure_images(docker_client, log=lambda line: None)
    assert second != first
    assert docker_client.images.get(f"{image.NODE_REPO}:latest").id == docker_client.images.get(second).id
    out = docker_client.containers.run(second, entrypoint=["cat", "/opt/dledger/nodes/marker.py"],
                                       remove=True)
    assert out.decode() == "MARK = 1\n"


@pytest.mark.docker
def test_node_image_holds_the_checkouts_nodes_and_no_credentials(docker_client: docker.DockerClient,
                                                                   node_image: str) -> None:
    script = ("cat /opt/dledger/nodes/store/logstore.py; ls /etc/ssh/ssh_host_* /root/.ssh/authorized_keys "
              "2>/dev/null; python3 -c 'import sys; print(sys.version_info[:2] >= (3, 11))'")
    out = docker_client.containers.run(node_image, entrypoint=["sh", "-c", script], remove=True).decode()
    assert out.startswith((REPO / "nodes" / "store" / "logstore.py").read_text())
    assert "ssh_host" not in out and "authorized_keys" not in out
    assert out.rstrip().endswith("True")


@pytest.mark.docker
def test_base_image_env_builds_the_node_on_another_debian_image(docker_client: docker.DockerClient,
                                                                node_image: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # A user with a registry names any Debian-based image; here: ours with one more file.
    recipe = image.files_hash(image.recipe_files())
    dockerfile = f"FROM {image.BASE_REPO}:{recipe[:12]}\nRUN echo custom > /etc/custom-base\n"
    other = "dledger-chaos-test/custom-base:latest"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=other, rm=True)
    monkeypatch.setenv("BASE_IMAGE", other)
    monkeypatch.setattr(image, "ensure_base", lambda *a, **k: pytest.fail("built ours despite BASE_IMAGE"))
    built = image.ensure_images(docker_client, log=lambda line: None)
    try:
        assert built != node_image
        out = docker_client.containers.run(built, entrypoint=["cat", "/etc/custom-base"], remove=True)
        assert out.decode() == "custom\n"
    finally:
        docker_client.api.tag(node_image, image.NODE_REPO, "latest")  # `latest` moved to `built`
        docker_client.images.remove(built, force=True)
        docker_client.images.remove(other, force=True)
    assert not docker_client.images.list(filters={"dangling": True, "label": image.LABEL_SOURCES})


def test_sources_hash_follows_the_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("one")
    b.write_text("two")
    first = image.files_hash([("a", a), ("b", b)])
    assert image.files_hash([("b", b), ("a", a)]) == first
    b.write_text("two!")
    assert image.files_hash([("a", a), ("b", b)]) != first
    assert image.files_hash([("a", a), ("b", b)], salt="other base") != image.files_hash([("a", a), ("b", b)])


def test_node_files_leave_out_bytecode() -> None:
    names = [name for name, _ in image.node_files()]
    assert "nodes/__init__.py" in names and "Dockerfile" in names and "entrypoint.sh" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_mirror_comes_from_apt_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    assert image.debian_mirror(tmp_path) == image.DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n")
    assert image.debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://old.example/debian bookworm main\n")
    assert image.debian_mirror(tmp_path) == "http://old.example/debian"
    monkeypatch.setenv("DEBIAN_MIRROR", "http://env.example/debian")
    assert image.debian_mirror(tmp_path) == "http://env.example/debian"


def test_a_missing_engine_is_one_clear_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(EngineUnavailable, match=r"Docker engine is not reachable.*start it"):
        connect()
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "harness", "clean"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 255
    assert done.stderr.startswith("error: The Docker engine is not reachable")
    assert len(done.stderr.strip().splitlines()) == 1
