"""What the nemeses need works inside a container with NET_ADMIN: iptables (nf_tables backend) and tc.

This machine's kernel has no sch_netem (CONFIG_NET_SCH_NETEM is not set), so `tc netem`
cannot delay or drop here; the netem test says so and skips. Packet loss is possible with
iptables' `statistic` match and rate limits with `tc ... tbf`, both checked here.
"""

from __future__ import annotations

import time

import pytest

from harness.containers.db import Db

pytestmark = pytest.mark.docker


def probe(db: Db, source: str, target: str, timeout: float = 1.0) -> bool:
    """Whether `source` can open a TCP connection to `target`'s sshd within `timeout` seconds."""
    script = (f"import socket; socket.create_connection(({db.address(target)!r}, 22), {timeout}).close()")
    return db.ssh(source).exec(f"python3 -c {script!r}", timeout=timeout + 10).ok


def test_iptables_drop_cuts_exactly_the_named_peer(cluster3: Db) -> None:
    rule = f"INPUT -s {cluster3.address('n1')} -j DROP"
    assert probe(cluster3, "n1", "n2") and probe(cluster3, "n3", "n2")
    cluster3.exec("n2", f"iptables -A {rule}")
    try:
        assert not probe(cluster3, "n1", "n2")
        assert probe(cluster3, "n3", "n2")
    finally:
        cluster3.exec("n2", f"iptables -D {rule}")
    assert probe(cluster3, "n1", "n2")


def test_iptables_random_loss_rule_is_accepted(cluster3: Db) -> None:
    rule = f"INPUT -s {cluster3.address('n1')} -m statistic --mode random --probability 1 -j DROP"
    cluster3.exec("n3", f"iptables -A {rule}")
    try:
        assert not probe(cluster3, "n1", "n3")
    finally:
        cluster3.exec("n3", f"iptables -D {rule}")


def test_tc_rate_limit_works(cluster3: Db) -> None:
    cluster3.exec("n1", "tc qdisc add dev eth0 root tbf rate 1mbit burst 32kbit latency 400ms")
    try:
        assert "tbf" in cluster3.exec("n1", "tc qdisc show dev eth0")
    finally:
        cluster3.exec("n1", "tc qdisc del dev eth0 root")


def test_tc_netem_delays_packets(cluster3: Db) -> None:
    added = cluster3.ssh("n3").exec("tc qdisc add dev eth0 root netem delay 300ms")
    if "qdisc kind is unknown" in added.stderr:
        pytest.skip("this kernel has no sch_netem (CONFIG_NET_SCH_NETEM): tc netem cannot work here")
    assert added.ok, added.stderr
    try:
        started = time.monotonic()
        assert probe(cluster3, "n1", "n3", timeout=5)
        assert time.monotonic() - started >= 0.3
    finally:
        cluster3.exec("n3", "tc qdisc del dev eth0 root")
