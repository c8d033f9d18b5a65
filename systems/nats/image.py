"""The NATS image: `nats-server` 2.10.27 from Debian trixie on the project's bookworm base, no registry.

`ensure_nats_image(client, base)` builds `dledger-chaos/nats:<hash>` FROM `base` (see
`harness.containers.image.ensure_base`) when it is missing or its recipe changed: `systems/nats/image/`
(the Dockerfile, `install-nats.sh`, and `nats-pin.pref`, which lets nothing but `nats-server`
come from trixie; bookworm's 2.9.10 rejects `sync_interval`), with the node image's sshd config
and entry point and the nemesis's agents (`harness.containers.image.SystemImage`). The image maps to no
history field itself: `systems.nats.config` says how the server runs in it, and
`systems.nats.client` what the history records.
"""

from __future__ import annotations

from pathlib import Path

from harness.containers.image import SYSTEM_REPOS, SystemImage

NATS_VERSION = "2.10.27-1+b2"  # trixie's; the one package taken from trixie
NATS = SystemImage(
    repo=SYSTEM_REPOS[0],
    what=f"nats-server {NATS_VERSION} from trixie",
    recipe_dir=Path(__file__).with_name("image"),
    recipe_files=("Dockerfile", "install-nats.sh", "nats-pin.pref"),
    version_arg="NATS_VERSION",
    version=NATS_VERSION,
)
NATS_REPO = NATS.repo
ensure_nats_image = NATS.ensure
