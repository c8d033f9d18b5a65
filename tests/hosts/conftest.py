"""Fixtures of the SSH-hosts tests: plain SSH hosts started outside the harness, with docker-compose.

The image is built once a session FROM the cached base image (labelled, removed at the end);
a key pair is made per session; the compose project's two networks are the test's own. The
harness sees the hosts only as SSH hosts: `SshHosts.inventory(...)` writes an inventory for
some of them.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest

from harness.containers.image import IMAGE_DIR, ensure_base, files_hash
from harness.hosts.db import leftovers
from harness.hosts.inventory import load_inventory
from harness.ssh.control import Ssh
from harness.ssh.keys import KeyPair, create_key_pair
from tests.support.compose import compose_project
from tests.support.compose import leftovers as compose_leftovers

HERE = Path(__file__).resolve().parent
IMAGE_REPO = "dledger-chaos/ssh-host"
LABEL = {"dledger-chaos.test": "ssh-hosts"}
NAMES = ("n1", "n2", "n3", "bare")
DATA_DIR = "/var/lib/dledger-chaos-test"


@dataclass(frozen=True)
class Host:
    name: str
    control: str  # the address the harness reaches it at
    peer: str  # its address on the peers network


@dataclass
class SshHosts:
    hosts: dict[str, Host]
    keys: KeyPair

    def inventory(self, path: Path, names: tuple[str, ...] = ("n1", "n2", "n3"), *, user: str = "root",
                  key: Path | None = None, extra: str = "") -> Path:
        """Write an inventory of `names` to `path`; `extra` lines go to [defaults]."""
        lines = ["[defaults]", f'user = "{user}"', f'key = "{key or self.keys.private_path}"',
                 f'data_dir = "{DATA_DIR}"', "connect_timeout = 20", extra]
        for name in names:
            host = self.hosts[name]
            lines += [f"[hosts.{name}]", f'address = "{host.control}"', f'peer_address = "{host.peer}"']
        path.write_text("\n".join(lines) + "\n")
        return path

    def ssh(self, name: str, user: str = "root") -> Ssh:
        ssh = Ssh(self.hosts[name].control, 22, self.keys.pkey(), name=name, user=user)
        ssh.connect(wait=30)
        return ssh

    def assert_clean(self, inventory: Path) -> None:
        """Nothing of the harness is left on the inventory's hosts (looked at as root)."""
        for spec in load_inventory(inventory).hosts:
            ssh = self.ssh(spec.name)
            try:
                assert leftovers(ssh, spec) == [], spec.name
            finally:
                ssh.close()


@pytest.fixture(scope="session")
def hosts_image(docker_client: docker.DockerClient) -> Iterator[str]:
    """The SSH host image FROM the cached base image; removed at the end of the session."""
    base = ensure_base(docker_client, log=lambda line: None)
    files = [(name, HERE / name) for name in ("Dockerfile", "entrypoint.sh")]
    files.append(("sshd_config", IMAGE_DIR / "sshd_config"))
    ref = f"{IMAGE_REPO}:{files_hash(files, salt=base)[:12]}"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, path in files:
            tar.add(path, arcname=name)
    context.seek(0)
    try:
        docker_client.images.build(fileobj=context, custom_context=True, tag=ref, rm=True, forcerm=True,
                                   buildargs={"BASE_IMAGE": base}, labels=LABEL)
    except docker.errors.BuildError as e:
        pytest.fail(f"building {ref} failed: {e}")
    yield ref
    docker_client.images.remove(ref, force=True)


@pytest.fixture(scope="session")
def ssh_hosts(docker_client: docker.DockerClient, hosts_image: str,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    """n1, n2, n3 and `bare` up with sshd; the compose project is removed (and checked gone) afterwards."""
    keys = create_key_pair(tmp_path_factory.mktemp("ssh"), "hosts-tests")
    env = {"HOSTS_IMAGE": hosts_image, "SSH_AUTHORIZED_KEY": keys.public_line}
    with compose_project(HERE / "docker-compose.yml", "dlc-hosts", env) as project:
        hosts = {}
        for name in NAMES:
            labels = [f"com.docker.compose.project={project}", f"com.docker.compose.service={name}"]
            [container] = docker_client.containers.list(filters={"label": labels})
            networks = container.attrs["NetworkSettings"]["Networks"]
            hosts[name] = Host(name, networks[f"{project}_control"]["IPAddress"],
                               networks[f"{project}_peers"]["IPAddress"])
        found = SshHosts(hosts, keys)
        for name in NAMES:
            found.ssh(name).close()  # sshd answers and takes the key (bounded retries)
        yield found
    left = compose_leftovers(docker_client, project)
    assert left == [], f"compose down left {left}"
