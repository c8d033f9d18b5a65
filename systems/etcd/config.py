"""The etcd command line of one member of an N-member static cluster, pure.

Every member lists every other in `--initial-cluster` (static bootstrap: no discovery service),
listens on all interfaces and advertises its host, which is the member's address in the run's
network (an IP, or a name the network resolves such as the container's name). The data
directory is a folder etcd makes itself (`<data dir>/etcd`, mode 0700: etcd 3.4 refuses an
existing folder with looser permissions) under the node's data directory, so the power-loss
file system and the disk faults find the WAL at `<data dir>/etcd/member/wal/*.wal`.
`unsafe_no_fsync` adds `--unsafe-no-fsync` ("will cause data loss"): the issue's must-fail row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.containers.cluster import DATA_DIR

CLIENT_PORT = 2379
PEER_PORT = 2380
ETCD_DIR = f"{DATA_DIR}/etcd"
BINARY = "/usr/bin/etcd"


@dataclass(frozen=True)
class EtcdOptions:
    """The options every member of one cluster shares."""

    data_dir: str = ETCD_DIR
    unsafe_no_fsync: bool = False
    token: str = "dledger-chaos"  # --initial-cluster-token: a cluster's members must agree on it
    heartbeat_ms: int = 100
    election_ms: int = 1000


def peer_url(host: str) -> str:
    return f"http://{host}:{PEER_PORT}"


def client_url(host: str) -> str:
    return f"http://{host}:{CLIENT_PORT}"


def etcd_command(name: str, members: Mapping[str, str], options: EtcdOptions | None = None) -> list[str]:
    """The argv that starts member `name` of the cluster `members` (member name -> host)."""
    if name not in members:
        raise ValueError(f"member {name!r} is not one of the cluster's: {sorted(members)}")
    options = options or EtcdOptions()
    initial = ",".join(f"{member}={peer_url(host)}" for member, host in members.items())
    argv = [
        BINARY,
        f"--name={name}",
        f"--data-dir={options.data_dir}",
        f"--listen-peer-urls=http://0.0.0.0:{PEER_PORT}",
        f"--listen-client-urls=http://0.0.0.0:{CLIENT_PORT}",
        f"--initial-advertise-peer-urls={peer_url(members[name])}",
        f"--advertise-client-urls={client_url(members[name])}",
        f"--initial-cluster={initial}",
        "--initial-cluster-state=new",
        f"--initial-cluster-token={options.token}",
        f"--heartbeat-interval={options.heartbeat_ms}",
        f"--election-timeout={options.election_ms}",
        "--logger=zap",
        "--log-outputs=stderr",
    ]
    if options.unsafe_no_fsync:
        argv.append("--unsafe-no-fsync")
    return argv
