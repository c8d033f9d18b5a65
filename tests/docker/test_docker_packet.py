"""The packet family on live containers: each effect measured while the fault is on and after healing.

Every fault here hits `all` links (both ways), so any pair of nodes can be measured. Loss is
the share of paced UDP datagrams from n1 that n2 receives; delay is the time of the node's
own client RPC (METADATA) from n1 to n2's node port; rate is the throughput of a bulk TCP
transfer; duplication and reordering are the relay's counters over the peers' real traffic.
This kernel has no sch_netem, so delay, duplicate and reorder run through the relay here
(the netem path is covered by tests/nemesis/test_packet_logic.py).
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.containers.db import Db
from harness.wait import wait_for
from nemesis import packet
from nemesis.packet import Magnitudes, PacketFault
from nodes.client import Client, ClientError

pytestmark = pytest.mark.docker

MAGNITUDES = Magnitudes(loss=0.3, delay_ms=300, jitter_ms=20, duplicate=0.3, rate_kbit=400)


def python(db: Db, node: str, script: str, timeout: float = 30.0) -> str:
    return db.exec(node, f"python3 -c {shlex.quote(script)}", timeout)


def listening(db: Db, node: str, proto: str, port: int) -> bool:
    return bool(db.exec(node, f"ss -Hl{proto}n 'sport = :{port}'").strip())


def while_receiving(db: Db, receiver: str, script: str, proto: str, port: int,
                    send: Callable[[], None]) -> str:
    """Run `script` on `receiver` (it listens on `port`), `send` once it listens; the script's output."""
    with ThreadPoolExecutor(1) as pool:
        received = pool.submit(python, db, receiver, script)
        wait_for(lambda: listening(db, receiver, proto, port) or received.done(), 10,
                 "the receiver never listened")
        send()
        return received.result(timeout=60)


UDP_COUNT = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 9999)); s.settimeout(10)
n = 0
try:
    s.recv(16); n = 1; s.settimeout(1)
    while True:
        s.recv(16); n += 1
except TimeoutError:
    pass
print(n)
"""


def udp_loss(db: Db, source: str, target: str, count: int = 2000) -> float:
    """The share of `count` paced datagrams from `source` that never reach `target`."""
    sender = (f"import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              f"for i in range({count}):\n"
              f"    s.sendto(b'x', ({db.address(target)!r}, 9999)); time.sleep(0.0005)")
    received = while_receiving(db, target, UDP_COUNT, "u", 9999, lambda: python(db, source, sender))
    return 1 - int(received) / count


BULK_RECEIVE = """
import socket, time
server = socket.create_server(("0.0.0.0", 9998)); server.settimeout(10)
conn, _ = server.accept(); conn.settimeout(30)
n, first = 0, None
while data := conn.recv(65536):
    first = first or time.monotonic(); n += len(data)
print(n, time.monotonic() - first)
"""


def throughput_kbit(db: Db, source: str, target: str, size: int) -> float:
    sender = (f"import socket\ns = socket.create_connection(({db.address(target)!r}, 9998))\n"
              f"s.sendall(b'x' * {size}); s.close()")
    received = while_receiving(db, target, BULK_RECEIVE, "t", 9998, lambda: python(db, source, sender))
    n, seconds = received.split()
    assert int(n) == size
    return int(n) * 8 / float(seconds) / 1000


def rpc_ms(db: Db, source: str, target: str, calls: int = 12) -> float:
    """The median time of the node's own client METADATA call from `source` to `target`'s node port."""
    script = f"""
import statistics, time
from nodes.client import Client
from nodes.peers import Address
with Client({{{target!r}: Address({db.address(target)!r}, {packet.NODE_PORT})}}, timeout=5) as c:
    times = []
    for _ in range({calls + 1}):
        t = time.monotonic(); c.metadata(node={target!r}); times.append(time.monotonic() - t)
print(statistics.median(times[1:]) * 1000)
"""
    return float(python(db, source, script))


def relay_stats(db: Db, node: str) -> dict[str, int]:
    out = db.exec(node, f"cat {packet.RELAY_STATS} 2>/dev/null; true").strip()
    return json.loads(out) if out else {}


def established(db: Db, node: str, port: int) -> set[str]:
    """The remote addresses of the established connections to `node`'s `port`."""
    out = db.exec(node, f"ss -Htn state established 'sport = :{port}'")
    return {line.split()[-1].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()}


@pytest.fixture
def fault(cluster3: Db) -> Iterator[list[PacketFault]]:
    """The faults a test starts: each is healed afterwards, whatever happened, and nothing is left."""
    faults: list[PacketFault] = []
    yield faults
    for f in faults:
        f.heal()
        assert f.leftovers() == []


def start(db: Db, faults: list[PacketFault], modes: tuple[str, ...],
          magnitudes: Magnitudes = MAGNITUDES) -> tuple[PacketFault, dict]:
    f = PacketFault(db, ("all",), (modes,), magnitudes)
    faults.append(f)
    value = f.start(random.Random(7))
    assert value["links"] == [["n1", "n2"], ["n1", "n3"], ["n2", "n3"]]
    assert f.leftovers(), "a fault in force shows in the leftovers"
    return f, value


def test_loss_drops_about_the_configured_share(cluster3: Db, fault: list[PacketFault]) -> None:
    assert udp_loss(cluster3, "n1", "n2") < 0.03
    f, value = start(cluster3, fault, ("loss",))
    assert value["mechanism"] == {"loss": "iptables-statistic"} and value["loss"] == 0.3
    assert abs(udp_loss(cluster3, "n1", "n2") - 0.3) < 0.06
    f.heal()
    assert f.leftovers() == []
    assert udp_loss(cluster3, "n1", "n2") < 0.03


def test_rate_limits_a_bulk_transfer(cluster3: Db, fault: list[PacketFault]) -> None:
    size = 150_000
    assert throughput_kbit(cluster3, "n1", "n2", size) > 10 * MAGNITUDES.rate_kbit
    f, value = start(cluster3, fault, ("rate",))
    assert value["mechanism"] == {"rate": "tc-htb"}
    assert 0.7 * 400 < throughput_kbit(cluster3, "n1", "n2", size) < 1.15 * 400
    f.heal()
    assert f.leftovers() == []
    assert throughput_kbit(cluster3, "n1", "n2", size) > 10 * MAGNITUDES.rate_kbit


def test_delay_slows_the_node_rpc_and_redirects_the_live_peer_links(cluster3: Db,
                                                                     fault: list[PacketFault]) -> None:
    cluster3.start()
    peers = {cluster3.address("n1"), cluster3.address("n3")}
    wait_for(lambda: peers <= established(cluster3, "n2", packet.NODE_PORT), 10, "peer links never came up")
    before = rpc_ms(cluster3, "n1", "n2")
    f, value = start(cluster3, fault, ("delay",))
    assert value["delay_ms"] == 300 and value["jitter_ms"] == 20
    relay = value["mechanism"]["delay"] == "relay"
    # the relay holds one way (n1's request); netem holds both ways (egress of both nodes)
    extra = (1 if relay else 2) * 300
    during = rpc_ms(cluster3, "n1", "n2")
    assert extra - 40 < during - before < extra + 150, (before, during)
    if relay:  # the peer links that were up go through the relay now, none direct
        wait_for(lambda: peers <= established(cluster3, "n2", packet.RELAY_PORT), 10, "links not redirected")
        assert not peers & established(cluster3, "n2", packet.NODE_PORT)
        assert relay_stats(cluster3, "n2")["connections"] >= 2
    f.heal()
    assert f.leftovers() == []
    assert rpc_ms(cluster3, "n1", "n2") < before + 40
    wait_for(lambda: peers <= established(cluster3, "n2", packet.NODE_PORT), 10, "links not direct again")


def test_cluster_keeps_working_under_delay_duplicate_and_reorder(cluster3: Db,
                                                                 fault: list[PacketFault]) -> None:
    cluster3.start()
    cluster3.wait_for_leader()
    f, value = start(cluster3, fault, ("delay", "duplicate", "reorder"),
                     Magnitudes(loss=0.3, delay_ms=60, jitter_ms=50, duplicate=0.3, rate_kbit=400))
    assert set(value["mechanism"]) == {"delay", "duplicate", "reorder"}
    acks = []
    with Client(cluster3.client_peers(), timeout=5) as client:
        for i in range(15):
            body = f"packet-{i}".encode()

            def append(body: bytes = body) -> object:
                try:
                    return client.append(body)
                except ClientError:
                    return None
            acks.append(wait_for(append, 60, f"append {body!r} never succeeded under the fault"))
    assert all(cluster3.running(n) for n in cluster3.names), "a node crashed under the fault"
    if value["mechanism"]["reorder"] == "relay":
        stats = [relay_stats(cluster3, n) for n in cluster3.names]
        assert sum(s["duplicated"] for s in stats) > 0 and sum(s["reordered"] for s in stats) > 0, stats
    stopped = f.stop()
    assert stopped["targets"] == cluster3.names
    assert f.leftovers() == []
    last = max(ack.last_index for ack in acks)

    def log_of(node: str) -> list[tuple[int, int, bytes]] | None:
        try:
            with Client(cluster3.client_peers(), timeout=2) as reader:
                entries = reader.get(0, last, node=node, mode="follower").entries
        except ClientError:
            return None
        return [(e.index, e.term, e.body) for e in entries] if len(entries) == last + 1 else None

    logs = {n: wait_for(lambda n=n: log_of(n), 30, f"{n} never caught up") for n in cluster3.names}
    assert logs["n1"] == logs["n2"] == logs["n3"]
    bodies = [body for _, _, body in logs["n1"]]
    assert all(f"packet-{i}".encode() in bodies for i in range(15))
