"""The Db on machines the harness did not create: the hosts of an inventory (`--hosts hosts.toml`), over SSH.

    db = HostsDb(load_inventory(Path("hosts.toml")), serve_args=[...], needs=needs_of(faults))
    db.check()        # connect, probe each host, refuse (HostsRefused) what it cannot run
    db.setup()        # check, copy nodes/ and the agents to code_dir, make data_dir
    db.start(); db.kill("n2"); db.start("n2"); ...   # as harness.containers.db.Db (harness.ssh.nodes)
    db.collect(results); db.teardown()

Jepsen's shape: a control node drives n1..nN over SSH. Each host needs only sshd, python3
(3.11+) and the tools its faults use (`harness.hosts.capabilities`); nothing from PyPI: the
node is stdlib only. On each host the harness owns two folders: `code_dir` (default
/opt/dledger, where the nemesis looks for its agents) gets this checkout's `nodes/` and
`nemesis/agents/`, and `data_dir` gets the node's files: `data/` (the node's data dir),
`log/` and `store/` (with the power-loss file system), `node.pid`. Each carries a marker
file, so the harness only ever removes what it made: a run refuses a `data_dir` that is
not empty and a `code_dir` it did not make.

Commands run by `sh` as the login user, or through passwordless `sudo -n` with `sudo =
true`, with `PYTHONPATH=code_dir`; the code goes over SFTP. Teardown (always, also on
errors and Ctrl-C) leaves nothing behind on a host this run prepared, and warns if it could
not: it kills the node,
removes what the fault families declare they may leave (`Family.host_cleanup`: the clock
strobe, the CHAOS chains, the packet qdisc and relay, the power-loss file system), then
`data_dir`'s files and, unless `keep`, `code_dir`. `clean_hosts` does the same for whatever
any run left (`python -m harness clean --hosts`), and `leftovers` lists what a host still
holds.

SSH errors: a host that refuses the login or whose host key does not match raises
`SshRefused`; one that does not answer within its `connect_timeout` a HarnessError.
"""

from __future__ import annotations

import io
import logging
import shlex
import sys
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko

from harness.containers.cluster import NODE_PORT, new_run_id
from harness.containers.db import signals_held
from harness.containers.image import files_hash, node_files
from harness.errors import HarnessError, HostsRefused, SshRefused
from harness.hosts.capabilities import MARKER, HostFacts, parse_facts, probe_script, problems
from harness.hosts.inventory import HostSpec, Inventory, InventoryError
from harness.ssh.control import Ssh
from harness.ssh.nodes import SshNodes
from nemesis.base import HostCleanup
from nemesis.catalogue import FAMILIES
from nodes.peers import Address
from systems.dledger import Dledger

log = logging.getLogger(__name__)
PATH = 'export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"'
HINT = "check the address and port in the inventory and that sshd runs there"


def wrapper(spec: HostSpec) -> Callable[[str], str]:
    """How every command runs on the host: by sh (whatever the login shell), with the node's code on
    PYTHONPATH, through sudo if asked."""
    prefix = f"{PATH}; export PYTHONPATH={shlex.quote(spec.code_dir)}; "
    sudo = "sudo -n -- " if spec.sudo else ""
    return lambda command: f"{sudo}sh -c {shlex.quote(prefix + command)}"


def sudo_refused(spec: HostSpec, stderr: str) -> str:
    """Why a `sudo = true` host ran nothing (the probe printed nothing), and what to do about it."""
    why = " ".join(stderr.split()) or "no output"
    user = spec.user
    return (f"sudo = true, but `sudo -n` fails for {user} ({why}): install sudo (Debian package sudo) and "
            f"give {user} passwordless sudo, e.g. the line `{user} ALL=(ALL:ALL) NOPASSWD: ALL` in a file of "
            "/etc/sudoers.d with mode 0440; or log in as root")


def open_ssh(spec: HostSpec) -> Ssh:
    """A connected Ssh to the host; SshRefused or HarnessError (see the module doc)."""
    if spec.agent and not _agent_keys():
        raise SshRefused(f"{spec.name}: agent = true, but ssh-agent offers no keys (is SSH_AUTH_SOCK set? "
                         "ssh-add the key)")
    try:
        key = spec.load_key()
    except InventoryError as e:  # the file changed since the inventory was read
        raise SshRefused(f"{spec.name}: {e}") from None
    ssh = Ssh(spec.address, spec.port, key, name=spec.name, user=spec.user, agent=spec.agent,
              known_hosts=spec.known_hosts, wrap=wrapper(spec), hint=HINT)
    ssh.connect(wait=spec.connect_timeout)
    return ssh


def _agent_keys() -> int:
    agent = paramiko.Agent()
    try:
        return len(agent.get_keys())
    finally:
        agent.close()


def code_files() -> list[tuple[str, Path]]:
    """What goes to code_dir: this checkout's `nodes/` and the nemesis's agents, as in the node image."""
    return [(name, path) for name, path in node_files() if name.startswith(("nodes/", "agents/"))]


def code_archive(files: Iterable[tuple[str, Path]]) -> bytes:
    """The files as a gzipped tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, path in files:
            tar.add(path, arcname=name)
    return buffer.getvalue()


def host_cleanups() -> list[HostCleanup]:
    """What the catalogue's families may leave on a host, each mechanism once, in catalogue order."""
    return list(dict.fromkeys(c for family in FAMILIES.values() for c in family.host_cleanup))


def _folders(spec: HostSpec) -> str:
    """The shell variables the snippets of `HostCleanup` use."""
    return f"data_dir={shlex.quote(spec.data_dir)}; code_dir={shlex.quote(spec.code_dir)}"


def cleanup_script(spec: HostSpec, run_id: str | None, keep_code: bool) -> str:
    """Remove what a run left on the host; `run_id` None: any run's. Prints one line per thing removed.

    Only a data_dir whose marker names the run (any run for None) is touched, and a
    code_dir with a marker; the node is killed only if its pid still runs `nodes serve`;
    then each family's `HostCleanup` runs (the root ones only as root).
    """
    code = shlex.quote(spec.code_dir)
    wanted = shlex.quote("run=.*" if run_id is None else f"run={run_id}")
    families = "".join(f"  {c.clean}\n" for c in host_cleanups() if not c.root)
    as_root = "".join(f"    {c.clean}\n" for c in host_cleanups() if c.root)
    if as_root:
        families += f'  if [ "$(id -u)" = 0 ]; then\n{as_root}  fi\n'
    code_rm = "" if keep_code else (f'if [ -f {code}/{MARKER} ]; then rm -rf {code} && '
                                    f'echo "removed {spec.code_dir}"; fi')
    return f"""
{_folders(spec)}; marker="$data_dir/{MARKER}"
if [ -f "$marker" ] && grep -qx {wanted} "$marker"; then
  if [ -f "$data_dir/node.pid" ]; then
    pid=$(cat "$data_dir/node.pid")
    if ps -o args= -p "$pid" 2>/dev/null | grep -q 'nodes serve'; then
      kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
      for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      echo "killed the node (pid $pid)"
    fi
  fi
{families}  rm -rf "$data_dir/data" "$data_dir/log" "$data_dir/store" "$data_dir/node.pid"
  if grep -qx created=1 "$marker"; then rm -f "$marker"; rmdir "$data_dir" 2>/dev/null
  else rm -f "$marker"; fi
  echo "removed the files in {spec.data_dir}"
fi
{code_rm}
true
"""


def leftovers_script(spec: HostSpec) -> str:
    """Prints one line per thing of the harness still on the host (a /run/dledger-* file no family
    declares too); nothing when it is clean."""
    families = "\n".join(c.listing for c in host_cleanups())
    return f"""
{_folders(spec)}
pgrep -af '[n]odes serve' | sed 's/^/node process: /'
{families}
ls -d /run/dledger-* 2>/dev/null | sed 's/^/file: /'
[ -e "$data_dir" ] && echo "data_dir: {spec.data_dir}"
[ -e "$code_dir" ] && echo "code_dir: {spec.code_dir}"
true
"""


def leftovers(ssh: Ssh, spec: HostSpec) -> list[str]:
    """What of the harness is still on the host (processes, rules, qdiscs, mounts, files, folders)."""
    lines = ssh.check(leftovers_script(spec), 30).splitlines()
    return list(dict.fromkeys(line for line in lines if line.strip()))  # a family's file is also a /run one


def _each(hosts: Iterable[HostSpec], action: Callable[[HostSpec], None]) -> dict[str, BaseException]:
    """Run `action` on every host at once; the exceptions by host name."""
    hosts = list(hosts)
    failures: dict[str, BaseException] = {}

    def one(spec: HostSpec) -> None:
        try:
            action(spec)
        except Exception as e:
            failures[spec.name] = e

    with ThreadPoolExecutor(max(1, len(hosts))) as pool:
        list(pool.map(one, hosts))
    return failures


def _raise_connect_failures(inventory: Inventory, failures: dict[str, BaseException]) -> None:
    """One error for every host that could not be reached (HarnessError) or refused us (SshRefused)."""
    if not failures:
        return
    lines = "\n".join(f"  {e}" for e in failures.values())
    refused = all(isinstance(e, SshRefused) for e in failures.values())
    for e in failures.values():
        if not isinstance(e, HarnessError):
            raise e
    kind = SshRefused if refused else HarnessError
    raise kind(f"cannot log in to every host of {inventory.path}:\n{lines}")


class HostsDb(SshNodes):
    """The nodes of one run on the hosts of an inventory; see the module doc."""

    def __init__(self, inventory: Inventory, *, system: Dledger | None = None, serve_args: Iterable[str] = (),
                 run_id: str | None = None, fuse: bool = False, keep: bool = False,
                 needs: dict[str, list[str]] | None = None,
                 node_args: Mapping[str, Sequence[str]] | None = None) -> None:
        """Our DLedger node (`system`, or one started with `serve_args` and each node's `node_args`) on
        the hosts: their code is a copy of this checkout's, the only system the hosts run."""
        root = inventory.hosts[0].data_dir  # the same on every host (the inventory checks)
        super().__init__(system or Dledger(list(serve_args), node_args or {}), fuse,
                         pidfile=f"{root}/node.pid", data_dir=f"{root}/data", store_dir=f"{root}/store",
                         fuse_log_dir=f"{root}/log")
        self.inventory = inventory
        self.run_id = run_id or new_run_id()
        self.keep = keep
        self.needs = dict(needs or {})
        if fuse:
            self.needs.setdefault("fuse", ["the power-loss file system"])
        self.facts: dict[str, HostFacts] = {}
        self._ssh: dict[str, Ssh] = {}
        self._prepared: set[str] = set()
        self._lock = threading.Lock()

    # -- where things are ------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return self.inventory.names

    def spec(self, name: str) -> HostSpec:
        if name not in self.names:
            raise HarnessError(f"no node {name!r} in {self.inventory.path}; nodes are {self.names}")
        return self.inventory.host(name)

    def ssh(self, name: str) -> Ssh:
        self.spec(name)
        if name not in self._ssh:
            raise HarnessError(f"{name}: not connected; call setup() first")
        return self._ssh[name]

    def address(self, name: str) -> str:
        """The node's peer IP address: what other nodes reach it at, and what partitions cut."""
        facts = self.facts.get(name)
        return facts.peer_ip if facts and facts.peer_ip else self.spec(name).peer

    def peers_arg(self) -> str:
        return ",".join(f"{n}={self.address(n)}:{NODE_PORT}" for n in self.names)

    def network_peers(self) -> dict[str, Address]:
        """Each node's client port at the address the harness reaches the host at."""
        return {n: Address(self.spec(n).address, NODE_PORT) for n in self.names}

    def client_peers(self) -> dict[str, Address]:
        return self.network_peers()

    def listen_args(self, name: str) -> list[str]:
        """Listen everywhere when clients come by another address than peers."""
        return [] if self.spec(name).address == self.address(name) else ["--listen", "0.0.0.0"]

    def left_running(self) -> str:
        ports = ", ".join(f"{n}={a.host}:{a.port}" for n, a in self.client_peers().items())
        path = self.inventory.path
        return (f"the nodes are left running on the hosts of {path} (client ports {ports}); stop them and "
                f"remove their files with: python -m harness clean --hosts {path}")

    # -- lifecycle -------------------------------------------------------------------------

    def connect(self) -> None:
        """Open one SSH connection per host (all at once); see `_raise_connect_failures`."""
        def one(spec: HostSpec) -> None:
            ssh = open_ssh(spec)
            with self._lock:
                self._ssh[spec.name] = ssh

        missing = [h for h in self.inventory.hosts if h.name not in self._ssh]
        _raise_connect_failures(self.inventory, _each(missing, one))

    def check(self) -> dict[str, HostFacts]:
        """Connect, probe every host, and raise HostsRefused listing every problem, host by host."""
        self.connect()
        found: dict[str, list[str]] = {}

        def probe(spec: HostSpec) -> None:
            result = self._ssh[spec.name].exec(probe_script(spec), timeout=60)
            if spec.sudo and not result.stdout.strip():
                found[spec.name] = [sudo_refused(spec, result.stderr)]
                return
            self.facts[spec.name] = parse_facts(result.stdout)
            found[spec.name] = problems(spec, self.facts[spec.name], self.needs, str(self.inventory.path))

        failures = _each(self.inventory.hosts, probe)
        if failures:
            raise HarnessError("could not probe " + "; ".join(f"{n}: {e}" for n, e in failures.items()))
        lines = [f"  {name}: {problem}" for name in self.names for problem in found.get(name, [])]
        if lines:
            raise HostsRefused(f"the hosts of {self.inventory.path} cannot run this test:\n"
                               + "\n".join(lines))
        return self.facts

    def setup(self) -> None:
        """Check the hosts, copy the code where it is not current, make each data_dir.

        A failure tears down what was made (and says so if that fails too), then raises."""
        try:
            self.check()
            files = code_files()
            sources = files_hash(files)
            archive = b""
            if any(self.facts[s.name].code_marker != sources for s in self.inventory.hosts):
                archive = code_archive(files)
            failures = _each(self.inventory.hosts, lambda spec: self._prepare(spec, sources, archive))
            if failures:
                raise HarnessError("could not prepare " + "; ".join(f"{n}: {e}" for n, e in failures.items()))
        except BaseException:
            self.teardown()
            raise

    def _prepare(self, spec: HostSpec, sources: str, archive: bytes) -> None:
        ssh = self._ssh[spec.name]
        facts = self.facts[spec.name]
        with self._lock:
            self._prepared.add(spec.name)
        if facts.code_marker != sources:
            self._install(ssh, spec, sources, archive)
        root = shlex.quote(spec.data_dir)
        created = "1" if facts.data_state == "absent" else "0"
        subdirs = " ".join(shlex.quote(f"{spec.data_dir}/{d}") for d in ("data", "log", "store"))
        ssh.check(f"mkdir -p {root} && printf 'run=%s\\ncreated=%s\\n' {shlex.quote(self.run_id)} {created} "
                  f"> {root}/{MARKER} && mkdir -p {subdirs}")

    def _install(self, ssh: Ssh, spec: HostSpec, sources: str, archive: bytes) -> None:
        """Copy the archive over SFTP (as the login user) and unpack it into code_dir."""
        with tempfile.NamedTemporaryFile(prefix="dlc-code-", suffix=".tar.gz") as local:
            local.write(archive)
            local.flush()
            remote = f".dlc-{self.run_id}-code.tar.gz"  # in the login's home
            ssh.upload(Path(local.name), remote)
        staged = shlex.quote(f"{ssh.check('pwd -P').strip()}/{remote}")  # sudo keeps the directory
        code = shlex.quote(spec.code_dir)
        # The marker goes first (ours, not current), so a copy cut short is still removed as ours.
        ssh.check(f"if [ -f {code}/{MARKER} ]; then rm -rf {code}; fi; mkdir -p {code} && "
                  f"echo copying > {code}/{MARKER} && tar -xzf {staged} -C {code} && "
                  f"printf '%s\\n' {sources} > {code}/{MARKER}; status=$?; rm -f {staged}; exit $status",
                  timeout=120)
        log.info("%s: copied nodes/ and the agents to %s", spec.name, spec.code_dir)

    def teardown(self) -> None:
        """Remove what this run made on every host it prepared, check that nothing is left, close SSH;
        safe at any point, and twice. What could not be removed is a warning (the run's verdict
        stands) naming the clean-up command."""
        with signals_held():
            prepared = [s for s in self.inventory.hosts if s.name in self._prepared and s.name in self._ssh]
            failures = _each(prepared, self._clean)
            self._prepared.clear()
            for ssh in self._ssh.values():
                ssh.close()
            self._ssh.clear()
        if failures:
            message = ("teardown could not clean every host: " + "; ".join(f"{e}" for e in failures.values())
                       + f"; remove what is left with: python -m harness clean --hosts {self.inventory.path}")
            log.error(message)
            print(f"warning: {message}", file=sys.stderr)

    def _clean(self, spec: HostSpec) -> None:
        ssh = self._ssh[spec.name]
        for line in ssh.check(cleanup_script(spec, self.run_id, self.keep), timeout=120).splitlines():
            log.info("%s: %s", spec.name, line)
        kept = f"code_dir: {spec.code_dir}" if self.keep else None
        left = [line for line in leftovers(ssh, spec) if line != kept]
        if left:
            raise HarnessError(f"{spec.name}: still there: {'; '.join(left)}")


def clean_hosts(inventory: Inventory, keep_code: bool = False) -> dict[str, list[str]]:
    """Remove what any run left on the inventory's hosts; what was removed and what is left, by host.

    Hosts that cannot be reached raise (HarnessError or SshRefused), naming every one."""
    report: dict[str, list[str]] = {}
    lock = threading.Lock()

    def one(spec: HostSpec) -> None:
        ssh = open_ssh(spec)
        try:
            removed = ssh.check(cleanup_script(spec, None, keep_code), timeout=120).splitlines()
            left = [f"left: {line}" for line in leftovers(ssh, spec)
                    if not (keep_code and line == f"code_dir: {spec.code_dir}")]
        finally:
            ssh.close()
        with lock:
            report[spec.name] = removed + left

    _raise_connect_failures(inventory, _each(inventory.hosts, one))
    return {spec.name: report[spec.name] for spec in inventory.hosts}

