"""Build the base and node images with no container registry: `python -m harness image`.

The base image is Debian bookworm made by `debootstrap` (minbase plus the packages in
`harness/containers/image/packages.txt`, recipe `harness/containers/image/base.sh`) and `docker import`; it is
tagged `dledger-chaos/base:<recipe hash>` and rebuilt only when the recipe changes. The
node image is built FROM it with the checkout's `nodes/` package, sshd config and entry
point, tagged `dledger-chaos/node:<sources hash>` (and `:latest`, which docker-compose.yml
uses) and labelled with that hash, so a run always tests the code in the checkout.
`BASE_IMAGE=...` (or `--base-image`) uses any Debian-based image as the base instead.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

import nodes
from harness.containers.cluster import connect
from harness.errors import ImageBuildError

IMAGE_DIR = Path(__file__).with_name("image")
NODES_DIR = Path(nodes.__file__).parent
AGENTS_DIR = Path(__file__).resolve().parents[2] / "nemesis" / "agents"
BASE_REPO = "dledger-chaos/base"
NODE_REPO = "dledger-chaos/node"
MUTANT_REPO = "dledger-chaos/mutant"  # node images of seeded bugs (harness.mutants)
SYSTEM_REPOS = ("dledger-chaos/nats", "dledger-chaos/etcd")  # systems we did not write (systems/)
LABEL_RECIPE = "dledger-chaos.recipe"
LABEL_SOURCES = "dledger-chaos.sources"
RECIPE_FILES = ("base.sh", "packages.txt")
NODE_IMAGE_FILES = ("Dockerfile", "packages.txt", "sshd_config", "entrypoint.sh")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# A Debian (not -security) archive in a deb822 .sources file, or in a one-line sources.list entry.
MIRROR_PATTERNS = (r"^URIs:\s*(\S+/debian)/?\s*$", r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)/?\s+bookworm\s")

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def files_hash(files: Iterable[tuple[str, Path]], salt: str = "") -> str:
    """sha256 over each file's name in the image and its bytes, in name order."""
    digest = hashlib.sha256(salt.encode())
    for name, path in sorted(files):
        digest.update(f"\0{name}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def recipe_files() -> list[tuple[str, Path]]:
    return [(name, IMAGE_DIR / name) for name in RECIPE_FILES]


def node_files(nodes_dir: Path | None = None) -> list[tuple[str, Path]]:
    """The node image's build context: image files at the top, `nodes/` (the checkout's, or the
    package at `nodes_dir`) and the nemesis's `agents/` below."""
    files = [(name, IMAGE_DIR / name) for name in NODE_IMAGE_FILES]
    return files + _tree("nodes", nodes_dir or NODES_DIR) + _tree("agents", AGENTS_DIR)


def _tree(prefix: str, folder: Path) -> list[tuple[str, Path]]:
    """Every source file under `folder`, named `prefix/...` in a build context."""
    return [(f"{prefix}/{path.relative_to(folder).as_posix()}", path) for path in sorted(folder.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"]


@dataclass(frozen=True)
class SystemImage:
    """The image of a system under test that we did not write, FROM the base image: its recipe
    (`recipe_dir`'s `recipe_files`, whose Dockerfile takes the build args BASE_IMAGE and
    `version_arg`), the node image's sshd config and entry point and the nemesis's agents, so
    the harness drives its containers as it drives a node's. Tagged `<repo>:<hash>` and labelled
    with the hash, which covers those files, the pinned `version` and the base image's id."""

    repo: str
    what: str  # how the build log names it ("etcd-server 3.4.23 from bookworm")
    recipe_dir: Path
    recipe_files: tuple[str, ...]
    version_arg: str
    version: str

    def files(self) -> list[tuple[str, Path]]:
        recipe = [(name, self.recipe_dir / name) for name in self.recipe_files]
        shared = [(name, IMAGE_DIR / name) for name in ("sshd_config", "entrypoint.sh")]
        return recipe + shared + _tree("agents", AGENTS_DIR)

    def sources(self, base_id: str) -> str:
        return files_hash(self.files(), salt=f"{base_id}\0{self.version}")

    def ensure(self, client: docker.DockerClient, base: str, log: Log = _stderr) -> str:
        """The image on `base`, built now if it is missing or its recipe or base changed; its tag."""
        try:
            base_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            raise ImageBuildError(f"base image {base} is not built: run `make image` "
                                  "(no registry is used, so it is never pulled)") from None
        sources = self.sources(base_id)
        ref = f"{self.repo}:{sources[:12]}"
        if _find(client, ref, LABEL_SOURCES, sources):
            log(f"{ref} is up to date")
        else:
            log(f"building {ref} ({self.what}) from {base}")
            _build(client, ref, self.files(), {"BASE_IMAGE": base, self.version_arg: self.version},
                   {LABEL_SOURCES: sources}, log)
        return ref


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror: $DEBIAN_MIRROR, else the one apt uses on this host, else deb.debian.org."""
    if os.environ.get("DEBIAN_MIRROR"):
        return os.environ["DEBIAN_MIRROR"]
    sources = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.sources")),
               *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for source in sources:
        text = source.read_text() if source.is_file() else ""
        for pattern in MIRROR_PATTERNS:
            match = re.search(pattern, text, re.MULTILINE)
            if match:
                return match.group(1)
    return DEFAULT_MIRROR


def _find(client: docker.DockerClient, ref: str, label: str, value: str) -> bool:
    try:
        return client.images.get(ref).labels.get(label) == value
    except docker.errors.ImageNotFound:
        return False


def ensure_base(client: docker.DockerClient, log: Log = _stderr) -> str:
    """The debootstrap-made base image, built now if its recipe changed or it is missing."""
    recipe = files_hash(recipe_files())
    ref = f"{BASE_REPO}:{recipe[:12]}"
    if _find(client, ref, LABEL_RECIPE, recipe):
        log(f"base image {ref} is up to date")
        return ref
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed: run `make image` (it installs it) or "
                              "`apt-get install -y debootstrap`, or set BASE_IMAGE to a Debian-based image.")
    if os.geteuid() != 0:
        raise ImageBuildError("building the base image with debootstrap needs root: run `make image` as "
                              "root, or set BASE_IMAGE to a Debian-based image.")
    mirror = debian_mirror()
    log(f"building base image {ref} with debootstrap from {mirror} (about a minute)")
    with tempfile.TemporaryDirectory(prefix="dlc-base-") as tmp:
        rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        _run_logged(["sh", str(IMAGE_DIR / "base.sh"), str(rootfs), mirror], log, "debootstrap")
        log("packing the root file system")
        _run_logged(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], log, "tar")
        log(f"importing {tarball.stat().st_size // 2**20} MiB into docker as {ref}")
        client.api.import_image_from_file(str(tarball), repository=BASE_REPO, tag=recipe[:12],
                                          changes=[f"LABEL {LABEL_RECIPE}={recipe}", 'CMD ["/bin/bash"]'])
    return ref


def _run_logged(argv: list[str], log: Log, what: str) -> None:
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            log(f"  {line.rstrip()}")
            tail = [*tail[-19:], line.rstrip()]
    if proc.returncode != 0:
        raise ImageBuildError(f"{what} failed with exit status {proc.returncode}; its last lines:\n"
                              + "\n".join(tail))


def ensure_node_image(client: docker.DockerClient, base: str, log: Log = _stderr,
                      mutant: tuple[str, Path] | None = None) -> str:
    """The node image for this checkout's `nodes/` on `base`, built now if the sources or the base
    changed; tagged `:latest` too. With `mutant` (its name, the directory holding its `nodes`
    package) the image of that seeded bug instead, `dledger-chaos/mutant:<name>-<hash>`, never
    tagged `:latest`."""
    try:
        base_id = client.images.get(base).id
    except docker.errors.ImageNotFound:
        base_id = base  # the build pulls it, for a user with a registry
    files = node_files() if mutant is None else node_files(mutant[1] / "nodes")
    sources = files_hash(files, salt=base_id)
    ref = f"{NODE_REPO}:{sources[:12]}" if mutant is None else f"{MUTANT_REPO}:{mutant[0]}-{sources[:12]}"
    if _find(client, ref, LABEL_SOURCES, sources):
        log(f"node image {ref} is up to date")
    else:
        log(f"building node image {ref} from {base}")
        _build(client, ref, files, {"BASE_IMAGE": base}, {LABEL_SOURCES: sources}, log)
    if mutant is None:
        client.api.tag(ref, NODE_REPO, "latest")
    return ref


def _build(client: docker.DockerClient, ref: str, files: list[tuple[str, Path]], buildargs: dict[str, str],
           labels: dict[str, str], log: Log) -> None:
    """Build `ref` from a context of `files` (name in the context, path), logging each build line."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, path in files:
            tar.add(path, arcname=name)
    context.seek(0)
    for chunk in client.api.build(fileobj=context, custom_context=True, tag=ref, rm=True, forcerm=True,
                                  decode=True, buildargs=buildargs, labels=labels):
        if "error" in chunk:
            raise ImageBuildError(f"building {ref} failed: {chunk['error'].strip()}")
        line = chunk.get("stream", "").rstrip()
        if line:
            log(f"  {line}")


def remove_images(client: docker.DockerClient) -> int:
    """Remove every image the project built (the cache; the next run rebuilds); how many."""
    removed = 0
    for repo in (MUTANT_REPO, NODE_REPO, *SYSTEM_REPOS, BASE_REPO):
        for found in client.images.list(name=repo):
            client.images.remove(found.id, force=True)
            removed += 1
    return removed


def ensure_images(client: docker.DockerClient | None = None, base_image: str | None = None,
                  log: Log = _stderr, mutant: tuple[str, Path] | None = None) -> str:
    """Make sure the base and node images are current; return the node image's reference (the
    image of `mutant`, a name and the directory of its `nodes` package, when given)."""
    client = client or connect()
    base = base_image or os.environ.get("BASE_IMAGE") or ensure_base(client, log)
    return ensure_node_image(client, base, log, mutant)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-image", default=os.environ.get("BASE_IMAGE"),
                        help="a Debian-based image to build on instead of the debootstrap-made base "
                             "(default: $BASE_IMAGE)")


def run(args: argparse.Namespace) -> int:
    print(ensure_images(base_image=args.base_image))
    return 0
