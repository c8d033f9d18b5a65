"""The etcd image, built with no container registry: `ensure_etcd_image(client, base)`.

FROM the project's base image (`harness.containers.image.ensure_base`, or any Debian bookworm image), it
adds bookworm's `etcd-server` at the one version `ETCD_VERSION` (`image/install-etcd.sh`), with
the node image's sshd config, entry point and the nemesis's agents, so a run can drive it like
a node container (`harness.containers.image.SystemImage`: tagged `dledger-chaos/etcd:<hash>`, labelled
with the hash of its recipe, version and base, built only when asked for and missing or stale).
"""

from __future__ import annotations

from pathlib import Path

from harness.containers.image import SYSTEM_REPOS, SystemImage

ETCD_VERSION = "3.4.23-4+b4"  # bookworm's etcd-server (apt-cache policy etcd-server)
ETCD = SystemImage(
    repo=SYSTEM_REPOS[1],
    what=f"etcd-server {ETCD_VERSION} from bookworm",
    recipe_dir=Path(__file__).with_name("image"),
    recipe_files=("Dockerfile", "install-etcd.sh"),
    version_arg="ETCD_VERSION",
    version=ETCD_VERSION,
)
ETCD_REPO = ETCD.repo
ensure_etcd_image = ETCD.ensure
