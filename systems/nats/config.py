"""The nats-server configuration of one node of an N-node JetStream cluster (a pure function).

`server_config(...)` renders the file the NATS image's server reads (`CONFIG_PATH`): the
client port, the monitoring port (`/jsz`, `/varz`), a JetStream store on the node's data
directory (`STORE_DIR`; the server keeps its files in `<STORE_DIR>/jetstream/`, a stream's
messages in `jetstream/<account>/streams/<stream>/msgs/*.blk`, where the power-loss file system
and the disk faults reach them) and the cluster routes to every peer.
`sync_interval` is the knob Jepsen's NATS 2.12.1 analysis turns on: `default` leaves the field
out (the server then fsyncs every 2 minutes and acknowledges before it), `always` fsyncs each
write before the acknowledgement, a Go duration (`10s`, `500ms`, `1m30s`) sets the period.
Nothing here maps to the history (docs/formats.md) directly; `systems.nats.client` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from harness.containers.cluster import DATA_DIR

CLIENT_PORT = 4222
CLUSTER_PORT = 6222
MONITOR_PORT = 8222
CONFIG_PATH = "/etc/nats/nats.conf"
STORE_DIR = DATA_DIR  # the server adds `jetstream/` itself
CLUSTER_NAME = "dlc"
SYNC_ALWAYS = "always"
SYNC_DEFAULT = "default"
SYNC_DEFAULT_PERIOD = "2m"  # nats-server's own default, for reports
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+")


def parse_sync_interval(value: str) -> str:
    """`always`, `default` or a positive Go duration, as given; ValueError naming the accepted forms."""
    if value in (SYNC_ALWAYS, SYNC_DEFAULT):
        return value
    if _DURATION.fullmatch(value) and re.search(r"[1-9]", value):
        return value
    raise ValueError(f"sync interval {value!r}: expected `always`, `default` or a positive duration "
                     "such as 10s, 500ms or 1m30s")


def server_config(name: str, peers: Mapping[str, str], sync_interval: str = SYNC_DEFAULT,
                  store_dir: str = STORE_DIR) -> str:
    """The config of server `name` in a cluster of `peers` (every server's name -> the host its
    routes reach it at; `name` among them). Routes go to every other peer; a server alone gets no
    cluster block (JetStream then runs unclustered)."""
    if name not in peers:
        raise ValueError(f"server {name!r} is not one of the peers {sorted(peers)}")
    sync = parse_sync_interval(sync_interval)
    routes = [f"nats-route://{host}:{CLUSTER_PORT}" for peer, host in sorted(peers.items()) if peer != name]
    cluster = [
        "cluster {",
        f"  name: {_quote(CLUSTER_NAME)}",
        f"  listen: \"0.0.0.0:{CLUSTER_PORT}\"",
        "  routes: [",
        *[f"    {_quote(route)}" for route in routes],
        "  ]",
        "}",
    ]
    lines = [
        f"server_name: {_quote(name)}",
        f"listen: \"0.0.0.0:{CLIENT_PORT}\"",
        f"http: \"0.0.0.0:{MONITOR_PORT}\"",
        "jetstream {",
        f"  store_dir: {_quote(store_dir)}",
        *([] if sync == SYNC_DEFAULT else [f"  sync_interval: {_quote(sync)}"]),
        "}",
        *(cluster if routes else []),
    ]
    return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    """A double-quoted string of the NATS config format (JSON's quoting is a subset it reads)."""
    return json.dumps(value)
