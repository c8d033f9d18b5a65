"""What a host of an inventory has, and what a run needs of it: a probe over SSH, then pure checks.

`probe_script(spec)` is one shell script, run through the host's command wrapper (as root,
with sudo, or as the login user); it prints `key=value` lines that `parse_facts` turns into
`HostFacts`. `problems(spec, facts, needs)` says, one sentence each, what stops a run on
that host: what every run needs (Python 3.11+, setsid, ps, ss, tar; code_dir and data_dir
free to use; the node port free), then each need word the run's fault families declare
(`nemesis.base.Family.needs`) with the families that need it. An empty list: the host
can run it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from harness.containers.cluster import NODE_PORT
from harness.hosts.inventory import CODE_DIR, HostSpec
from nemesis import catalogue

MARKER = ".dledger-chaos"  # in code_dir and data_dir: made by the harness (and by which run)
PYTHON_MIN = (3, 11)
# Every run: the node's process control and the copies of its files.
BASE_TOOLS = {"setsid": "util-linux", "ps": "procps", "ss": "iproute2", "tar": "tar"}
TOOLS = (*BASE_TOOLS, "iptables", "tc", "ip", "fusermount3")


@dataclass(frozen=True)
class HostFacts:
    """What the probe found on one host, as the user commands run as (root through sudo, say)."""

    uid: int | None = None
    python: tuple[int, ...] | None = None
    peer_ip: str | None = None
    tools: frozenset[str] = frozenset()
    iptables_works: bool = False
    pyfuse3: bool = False
    dev_fuse: bool = False
    addresses: dict[str, tuple[str, ...]] = field(default_factory=dict)  # interface -> IPv4 addresses
    listening: frozenset[int] = frozenset()
    code_state: str = "absent"  # absent | empty | ours | foreign
    code_marker: str = ""
    code_writable: bool = False
    data_state: str = "absent"
    data_writable: bool = False

    @property
    def root(self) -> bool:
        return self.uid == 0


def probe_script(spec: HostSpec) -> str:
    """The shell script whose output `parse_facts` reads."""
    peer = shlex.quote(spec.peer)
    dirs = " ".join(f"{kind}={shlex.quote(path)}" for kind, path in (("code", spec.code_dir),
                                                                      ("data", spec.data_dir)))
    return f"""
echo "uid=$(id -u)"
python3 -c 'import sys; print("python=%d.%d.%d" % sys.version_info[:3])' 2>/dev/null
python3 -c 'import socket, sys; print("peer_ip=" + socket.gethostbyname(sys.argv[1]))' {peer} 2>/dev/null
for t in {" ".join(TOOLS)}; do command -v "$t" >/dev/null 2>&1 && echo "tool=$t"; done
iptables -w 5 -S INPUT >/dev/null 2>&1 && echo iptables_works=1
python3 -c 'import pyfuse3, trio' >/dev/null 2>&1 && echo pyfuse3=1
[ -c /dev/fuse ] && echo dev_fuse=1
ip -o -4 addr show 2>/dev/null | while read -r _ dev _ cidr _; do echo "addr=$dev ${{cidr%/*}}"; done
ss -Hltn 2>/dev/null | while read -r _ _ _ local _; do echo "listen=${{local##*:}}"; done
for pair in {dirs}; do
  kind=${{pair%%=*}}; dir=${{pair#*=}}
  if [ -f "$dir/{MARKER}" ]; then
    echo "${{kind}}_state=ours"; echo "${{kind}}_marker=$(head -n 1 "$dir/{MARKER}")"
  elif [ -d "$dir" ] && [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then echo "${{kind}}_state=empty"
  elif [ -e "$dir" ]; then echo "${{kind}}_state=foreign"
  else echo "${{kind}}_state=absent"; fi
  up=$dir; while [ ! -e "$up" ]; do up=$(dirname "$up"); done
  [ -d "$up" ] && [ -w "$up" ] && echo "${{kind}}_writable=1"
done
true
"""


def parse_facts(output: str) -> HostFacts:
    """The facts of a probe's output (lines it does not know are ignored)."""
    values: dict[str, str] = {}
    tools: set[str] = set()
    addresses: dict[str, list[str]] = {}
    listening: set[int] = set()
    for line in output.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep:
            continue
        if key == "tool":
            tools.add(value)
        elif key == "addr" and " " in value:
            dev, ip = value.split(" ", 1)
            addresses.setdefault(dev, []).append(ip)
        elif key == "listen" and value.isdigit():
            listening.add(int(value))
        else:
            values[key] = value
    python = values.get("python", "")
    return HostFacts(
        uid=int(values["uid"]) if values.get("uid", "").isdigit() else None,
        python=tuple(int(p) for p in python.split(".")) if python.replace(".", "").isdigit() else None,
        peer_ip=values.get("peer_ip") or None,
        tools=frozenset(tools),
        iptables_works=values.get("iptables_works") == "1",
        pyfuse3=values.get("pyfuse3") == "1",
        dev_fuse=values.get("dev_fuse") == "1",
        addresses={dev: tuple(ips) for dev, ips in addresses.items()},
        listening=frozenset(listening),
        code_state=values.get("code_state", "absent"),
        code_marker=values.get("code_marker", ""),
        code_writable=values.get("code_writable") == "1",
        data_state=values.get("data_state", "absent"),
        data_writable=values.get("data_writable") == "1",
    )


def needs_of(faults: list[str], fuse: bool = False) -> dict[str, list[str]]:
    """{need word: the families of `faults` that declare it}; `fuse` adds the power-loss file system."""
    needs: dict[str, list[str]] = {}
    for name in faults:
        for need in sorted(catalogue.FAMILIES[name].needs):
            needs.setdefault(need, []).append(name)
    if fuse and "fuse" not in needs:
        needs["fuse"] = ["the power-loss file system"]
    return needs


def _root(spec: HostSpec, facts: HostFacts) -> str | None:
    if facts.root:
        return None
    how = "sudo -n runs as a user that is not root" if spec.sudo else (
        f"user {spec.user} is not root (log in as root, or give {spec.user} passwordless sudo and set "
        "sudo = true)")
    return f"root privileges: {how}"


def _iptables(spec: HostSpec, facts: HostFacts) -> str | None:
    if "iptables" not in facts.tools:
        return "iptables, which is not installed (Debian package iptables)"
    if facts.root and not facts.iptables_works:
        return "a working iptables: `iptables -S INPUT` fails as root (no netfilter in this kernel?)"
    return None


def _tc(spec: HostSpec, facts: HostFacts) -> str | None:
    return None if "tc" in facts.tools else "tc, which is not installed (Debian package iproute2)"


def _eth0(spec: HostSpec, facts: HostFacts) -> str | None:
    if "eth0" not in facts.addresses:
        return "an interface eth0 (the packet faults shape eth0), which this host does not have"
    if facts.peer_ip and facts.peer_ip not in facts.addresses["eth0"]:
        on = [dev for dev, ips in facts.addresses.items() if facts.peer_ip in ips]
        where = f"on {on[0]}" if on else "on no interface of this host"
        return f"the peer address on eth0 (the packet faults shape eth0), but {facts.peer_ip} is {where}"
    return None


def _agents(spec: HostSpec, facts: HostFacts) -> str | None:
    if spec.code_dir == CODE_DIR:
        return None
    return (f"the nemesis's agents at {CODE_DIR}/agents, but code_dir is {spec.code_dir}: "
            f"set code_dir = \"{CODE_DIR}\"")


def _fuse(spec: HostSpec, facts: HostFacts) -> str | None:
    lacking = [what for what, ok in (("/dev/fuse", facts.dev_fuse),
                                     ("fusermount3 (Debian package fuse3)", "fusermount3" in facts.tools),
                                     ("python3's pyfuse3 and trio (Debian package python3-pyfuse3)",
                                      facts.pyfuse3)) if not ok]
    return f"FUSE, but it lacks {', '.join(lacking)}" if lacking else None


NEED_CHECKS = {"root": _root, "iptables": _iptables, "tc": _tc, "eth0": _eth0, "agents": _agents,
               "fuse": _fuse}


def base_problems(spec: HostSpec, facts: HostFacts, inventory: str = "FILE") -> list[str]:
    """What stops any run on this host (`inventory`: the file, for the clean-up command's hint)."""
    clean = f"`python -m harness clean --hosts {inventory}`"
    found = []
    if facts.python is None:
        found.append("python3 is not installed (the node runs on the host's python3; Debian package python3)")
    elif facts.python[:2] < PYTHON_MIN:
        found.append(f"python3 is {'.'.join(map(str, facts.python))}; the node needs 3.11 or newer")
    missing = [f"{tool} ({package})" for tool, package in BASE_TOOLS.items() if tool not in facts.tools]
    if missing:
        found.append(f"missing {', '.join(missing)}")
    if facts.python is not None and facts.peer_ip is None:
        found.append(f"cannot resolve its peer address {spec.peer}")
    if facts.code_state == "foreign":
        found.append(f"code_dir {spec.code_dir} exists and was not made by the harness: choose another "
                     "code_dir or remove it")
    elif facts.code_state == "absent" and not facts.code_writable:
        found.append(f"cannot create code_dir {spec.code_dir} as {_who(spec, facts)}")
    if facts.data_state == "foreign":
        found.append(f"data_dir {spec.data_dir} is not empty and was not made by the harness: choose another "
                     "data_dir or empty it")
    elif facts.data_state == "ours":
        found.append(f"data_dir {spec.data_dir} holds the files of another run (still running, or one that "
                     f"crashed): {clean} removes them")
    elif facts.data_state == "absent" and not facts.data_writable:
        found.append(f"cannot create data_dir {spec.data_dir} as {_who(spec, facts)}")
    if NODE_PORT in facts.listening:
        found.append(f"port {NODE_PORT}, the node's, is in use (a node of another run? {clean} stops one "
                     "the harness left)")
    return found


def _who(spec: HostSpec, facts: HostFacts) -> str:
    return "root" if facts.root else f"user {spec.user}"


def problems(spec: HostSpec, facts: HostFacts, needs: dict[str, list[str]],
             inventory: str = "FILE") -> list[str]:
    """Every reason this host cannot run a test whose families need `needs` (see `needs_of`)."""
    found = base_problems(spec, facts, inventory)
    for need, families in needs.items():
        check = NEED_CHECKS.get(need)
        problem = check(spec, facts) if check else f"{need!r}, which the harness cannot check on a host"
        if problem:
            found.append(f"{', '.join(families)} need{'s' if len(families) == 1 else ''} {problem}")
    return found
