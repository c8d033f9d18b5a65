"""The inventory of machines a run drives over SSH (`--hosts hosts.toml`), read with tomllib and validated.

    [defaults]                        # optional: any host field but the addresses, for every host
    user = "root"
    key = "~/.ssh/dledger_ed25519"    # a private key file (relative to this file), or agent = true
    data_dir = "/var/lib/dledger-chaos"

    [hosts.n1]                        # the node's name
    address = "192.0.2.11"            # how the harness reaches it: SSH and the node's client port
    peer_address = "10.0.0.11"        # optional: node-to-node traffic (default: address)

    [hosts.n2]
    address = "192.0.2.12"
    port = 2222

Every mistake is an `InventoryError` (a `ValueError`: the run exits 254) naming the file,
the host and the field. The key file is read here, so a missing, unreadable or
passphrase-protected key is such an error too; the key itself never leaves this module's
`HostSpec.load_key`, and `Inventory.record()` (what test.json keeps) names no key, agent or
known-hosts file.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import paramiko

CODE_DIR = "/opt/dledger"  # where the nemesis's agents are looked for (/opt/dledger/agents)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
DEFAULTS_ONLY = ("address", "peer_address")  # fields a [defaults] table may not set


class InventoryError(ValueError):
    """The inventory cannot be used; the message names the file, the host and the field."""


@dataclass(frozen=True)
class HostSpec:
    """One host of the inventory, with every default applied.

    `data_dir`: a folder the harness owns for the run (the node's store and logs, its pid
    file), made at setup and removed at teardown; it must not exist, or be empty.
    `code_dir`: where this checkout's `nodes/` and the nemesis's agents are copied.
    `sudo`: run every command through passwordless `sudo -n` (for a login that is not root).
    """

    name: str
    address: str
    data_dir: str
    peer_address: str | None = None
    user: str = "root"
    port: int = 22
    key: Path | None = None
    agent: bool = False
    sudo: bool = False
    code_dir: str = CODE_DIR
    known_hosts: Path | None = None
    connect_timeout: float = 10.0

    @property
    def peer(self) -> str:
        """The address other nodes reach this one at."""
        return self.peer_address or self.address

    @property
    def login(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"

    def load_key(self) -> paramiko.PKey | None:
        """The private key (None with `agent`); InventoryError if it cannot be read."""
        return None if self.key is None else _read_key(self.key, f"host {self.name!r}: field 'key'")

    def record(self) -> dict[str, str | int | bool | None]:
        """What test.json keeps of this host: enough to rerun, nothing secret."""
        return {"address": self.address, "peer_address": self.peer_address, "user": self.user,
                "port": self.port, "sudo": self.sudo, "data_dir": self.data_dir, "code_dir": self.code_dir}


FIELDS = {f.name: f for f in fields(HostSpec) if f.name != "name"}


@dataclass(frozen=True)
class Inventory:
    """The hosts of one inventory file, in file order."""

    path: Path
    hosts: tuple[HostSpec, ...]

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> HostSpec:
        return next(h for h in self.hosts if h.name == name)

    def first(self, count: int) -> Inventory:
        """The inventory of its first `count` hosts (a run on fewer nodes than it names)."""
        return Inventory(self.path, self.hosts[:count])

    def record(self) -> dict[str, object]:
        """What test.json keeps: the file as given and each host's `record()`."""
        return {"file": str(self.path), "hosts": {h.name: h.record() for h in self.hosts}}


def load_inventory(path: Path) -> Inventory:
    """Read and validate the inventory at `path`; InventoryError on any mistake."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InventoryError(f"{path}: cannot read the inventory: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InventoryError(f"{path}: not valid TOML: {e}") from None
    return parse_inventory(data, path)


def parse_inventory(data: dict[str, object], path: Path) -> Inventory:
    """Validate parsed TOML; relative key and known-hosts paths are taken from `path`'s folder."""
    unknown = sorted(set(data) - {"defaults", "hosts"})
    if unknown:
        raise InventoryError(f"{path}: unknown table or key {', '.join(unknown)}; "
                             "an inventory has [defaults] and [hosts.NAME] tables")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise InventoryError(f"{path}: `defaults` must be a table ([defaults])")
    for name in DEFAULTS_ONLY:
        if name in defaults:
            raise InventoryError(f"{path}: [defaults]: field {name!r} differs per host; "
                                 "set it in each [hosts.NAME]")
    hosts = data.get("hosts")
    if not isinstance(hosts, dict) or not hosts:
        raise InventoryError(f"{path}: no hosts: add a [hosts.NAME] table with an address for each node")
    specs = []
    for name, table in hosts.items():
        if not NAME.fullmatch(name):
            raise InventoryError(f"{path}: host {name!r}: a node name is 1-32 letters, digits, '_', '.' "
                                 "or '-', starting with a letter or digit")
        if not isinstance(table, dict):
            raise InventoryError(f"{path}: host {name!r}: must be a table ([hosts.{name}])")
        specs.append(_host(name, {**defaults, **table}, path))
    _check_together(specs, path)
    return Inventory(path, tuple(specs))


def _host(name: str, table: dict[str, object], path: Path) -> HostSpec:
    where = f"{path}: host {name!r}"
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise InventoryError(f"{where}: unknown field {', '.join(map(repr, unknown))}; "
                             f"the fields are {', '.join(FIELDS)}")
    for required in ("address", "data_dir"):
        if required not in table:
            raise InventoryError(f"{where}: field {required!r} is missing")
    values: dict[str, Any] = {}  # each of the type of its HostSpec field, as _field checks
    for key, value in table.items():
        values[key] = _field(key, value, f"{where}: field {key!r}", path.parent)
    spec = HostSpec(name=name, **values)
    if spec.key is not None and spec.agent:
        raise InventoryError(f"{where}: fields 'key' and 'agent': give key = \"PATH\" (a private key file) "
                             "or agent = true (the keys of ssh-agent), not both")
    if spec.key is None and not spec.agent:
        raise InventoryError(f"{where}: field 'key' is missing: give key = \"PATH\" (a private key file) or "
                             "agent = true (the keys of ssh-agent)")
    if spec.key is not None:
        _read_key(spec.key, f"{where}: field 'key'")
    if spec.known_hosts is not None and not spec.known_hosts.is_file():
        raise InventoryError(f"{where}: field 'known_hosts': no such file {spec.known_hosts}")
    if _inside(spec.data_dir, spec.code_dir) or _inside(spec.code_dir, spec.data_dir):
        raise InventoryError(f"{where}: fields 'data_dir' and 'code_dir' must not contain each other "
                             f"({spec.data_dir}, {spec.code_dir})")
    return spec


def _field(key: str, value: object, where: str, base: Path) -> object:
    """One field's value, checked and converted; InventoryError naming `where` when it is wrong."""
    if key in ("agent", "sudo"):
        if not isinstance(value, bool):
            raise InventoryError(f"{where}: must be true or false, not {value!r}")
        return value
    if key == "port":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise InventoryError(f"{where}: must be a port number 1-65535, not {value!r}")
        return value
    if key == "connect_timeout":
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise InventoryError(f"{where}: must be a positive number of seconds, not {value!r}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise InventoryError(f"{where}: must be a non-empty string, not {value!r}")
    if key in ("key", "known_hosts"):
        return (base / Path(value).expanduser()).resolve()
    if key in ("data_dir", "code_dir"):
        return _remote_dir(value, where)
    if key in ("address", "peer_address"):
        return _address(value, where)
    if key == "user" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", value):
        raise InventoryError(f"{where}: not a user name: {value!r}")
    return value


def _remote_dir(value: str, where: str) -> str:
    """An absolute, normalised path below / (the harness creates and removes it)."""
    normal = posixpath.normpath(value)
    if not value.startswith("/") or normal == "/" or ".." in value.split("/"):
        raise InventoryError(f"{where}: must be an absolute folder below / (the harness creates and removes "
                             f"it), not {value!r}")
    if not re.fullmatch(r"[A-Za-z0-9_./+@-]+", normal):
        raise InventoryError(f"{where}: use letters, digits and _ . / + @ - only, not {value!r}")
    return normal


def _address(value: str, where: str) -> str:
    """An IP address or a host name."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if not re.fullmatch(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*"
                        r"[A-Za-z0-9])?)*\.?", value):
        raise InventoryError(f"{where}: not an IP address or host name: {value!r}")
    return value


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _read_key(path: Path, where: str) -> paramiko.PKey:
    try:
        return paramiko.PKey.from_path(path)
    except FileNotFoundError:
        raise InventoryError(f"{where}: no such file {path}") from None
    except PermissionError:
        raise InventoryError(f"{where}: cannot read {path} (permission denied)") from None
    except (paramiko.PasswordRequiredException, TypeError) as e:  # TypeError: cryptography's OpenSSH loader
        if not isinstance(e, paramiko.PasswordRequiredException) and "password" not in str(e):
            raise
        raise InventoryError(f"{where}: {path} is protected by a passphrase; load it into ssh-agent "
                             "(ssh-add) and set agent = true instead") from None
    except (paramiko.SSHException, ValueError, OSError) as e:
        raise InventoryError(f"{where}: {path} is not a private key paramiko can read ({e})") from None


def _check_together(specs: list[HostSpec], path: Path) -> None:
    """What must hold across hosts: distinct logins and peer addresses, one data dir."""
    seen_login: dict[tuple[str, int], str] = {}
    seen_peer: dict[str, str] = {}
    for spec in specs:
        login = (spec.address, spec.port)
        if login in seen_login:
            raise InventoryError(f"{path}: host {spec.name!r}: fields 'address' and 'port': the same SSH "
                                 f"host as {seen_login[login]!r} ({spec.address}:{spec.port}); one node a "
                                 "host")
        seen_login[login] = spec.name
        if spec.peer in seen_peer:
            raise InventoryError(f"{path}: host {spec.name!r}: field 'peer_address': {spec.peer} is also "
                                 f"{seen_peer[spec.peer]!r}'s; each node needs its own (partitions cut by "
                                 "address)")
        seen_peer[spec.peer] = spec.name
    data_dirs = {spec.data_dir for spec in specs}
    if len(data_dirs) > 1:
        each = ", ".join(f"{s.name}: {s.data_dir}" for s in specs)
        raise InventoryError(f"{path}: field 'data_dir' differs between hosts ({each}); the nemesis "
                             "addresses the same folder on every node: give one data_dir (in [defaults])")
