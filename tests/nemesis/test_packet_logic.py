"""Pure logic of the packet family (modes, links, mechanisms, commands) and the frame relay on loopback.

The nodes are a recording stand-in here; the real iptables, tc and relay paths run against
containers in tests/docker/test_docker_packet.py.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from nemesis import packet
from nemesis.agents import relay
from nemesis.catalogue import FAMILIES, parse_options
from nemesis.packet import Magnitudes, Shape
from nodes.wire import FrameParser, encode_frame

NAMES = ["n1", "n2", "n3"]
MAGNITUDES = Magnitudes(loss=0.2, delay_ms=200, jitter_ms=100, duplicate=0.2, rate_kbit=100)


class RecordingNodes:
    """Answers the probe with `kinds` and the clean command with `stats`; records every command."""

    def __init__(self, kinds: str = "htb", stats: str = "", leader: str = "n2") -> None:
        self.names = list(NAMES)
        self.data_dir = "/var/lib/dledger"
        self.kinds = kinds
        self.stats = stats
        self.commands: list[tuple[str, str]] = []
        self._leader = leader

    def address(self, node: str) -> str:
        return f"10.9.0.{node[1:]}"

    def exec(self, node: str, command: str, timeout: float = 10.0) -> str:
        self.commands.append((node, command))
        if command == packet.PROBE:
            return self.kinds
        if command == packet.clean_command():
            return self.stats
        if command == packet.LEFTOVERS and node == "n3":
            return "-A CHAOS-PACKET -s 10.9.0.1/32 -j DROP\n"
        return ""

    def leader(self, timeout: float = 1.0) -> str:
        return self._leader

    def on(self, node: str) -> list[str]:
        return [c for n, c in self.commands if n == node]


def test_modes_parse_single_combined_and_all() -> None:
    assert packet.parse_modes("loss, reorder+delay,all") == (("loss",), ("delay", "reorder"), packet.MODES)
    for bad in ("jitter", "delay+", "", "loss+nope"):
        with pytest.raises(ValueError):
            packet.parse_modes(bad)


def test_defaults_parse_and_the_family_is_registered() -> None:
    values = parse_options({})
    assert values["packet_modes"][-1] == packet.MODES
    assert values["packet_delay_ms"] == 100 and values["packet_loss"] == 0.2
    assert FAMILIES["packet"].vocabulary() == {"start": "start-packet", "stop": "stop-packet",
                                               "label": "packet faults"}
    with pytest.raises(ValueError, match="packet-loss"):
        parse_options({"packet_loss": "1.5"})


def test_links_touch_the_chosen_nodes() -> None:
    assert packet.faulted_links(["n2"], NAMES) == [("n1", "n2"), ("n2", "n3")]
    assert packet.faulted_links(NAMES, NAMES) == [("n1", "n2"), ("n1", "n3"), ("n2", "n3")]
    assert packet.peers_of("n2", [("n1", "n2"), ("n2", "n3")]) == ["n1", "n3"]
    assert packet.peers_of("n1", [("n1", "n2"), ("n2", "n3")]) == ["n2"]


def test_shape_holds_for_reorder_without_delay() -> None:
    shape = Shape.of(("reorder",), MAGNITUDES)
    assert (shape.delay_ms, shape.jitter_ms, shape.reorder) == (100, 100, True)
    assert shape.value() == {"mode": "reorder", "delay_ms": 100, "jitter_ms": 100}
    assert Shape.of(("loss", "rate"), MAGNITUDES).value() == {"mode": "loss+rate", "loss": 0.2,
                                                              "rate_kbit": 100}


def test_mechanisms_follow_the_kernel() -> None:
    assert packet.mechanisms(packet.MODES, frozenset({"htb"})) == {
        "loss": "iptables-statistic", "delay": "relay", "duplicate": "relay", "reorder": "relay",
        "rate": "tc-htb"}
    assert packet.mechanisms(("delay",), frozenset({"htb", "netem"})) == {"delay": "tc-netem"}
    with pytest.raises(RuntimeError, match="htb"):
        packet.mechanisms(("rate",), frozenset())


def test_netem_commands_put_a_netem_leaf_under_each_peer_class() -> None:
    shape = Shape.of(("delay", "duplicate", "reorder", "rate"), MAGNITUDES)
    [tc] = packet.node_commands(shape, packet.mechanisms(shape.modes, frozenset({"htb", "netem"})),
                                "10.9.0.2", ["10.9.0.1", "10.9.0.3"], 7)
    assert "root handle d1: htb" in tc
    assert "classid d1:2 htb rate 100kbit ceil 100kbit" in tc
    assert "match ip dst 10.9.0.3/32 flowid d1:2" in tc
    assert "parent d1:1 netem delay 200ms 100ms reorder 25% duplicate 20%" in tc


def test_relay_commands_redirect_guard_and_reset_the_peers() -> None:
    shape = Shape.of(("loss", "delay", "duplicate"), MAGNITUDES)
    loss, start, redirect = packet.node_commands(shape, packet.mechanisms(shape.modes, frozenset({"htb"})),
                                                 "10.9.0.2", ["10.9.0.1"], 7)
    assert "-s 10.9.0.1 -m statistic --mode random --probability 0.2 -j DROP" in loss
    assert "--target 10.9.0.2:20911 --delay-ms 200 --jitter-ms 100 --duplicate 0.2 --seed 7" in start
    assert "--reorder" not in start
    assert "-s 10.9.0.1 -p tcp --dport 20911 -j REDIRECT --to-ports 20912" in redirect
    assert "-j REJECT --reject-with tcp-reset" in redirect
    assert "ss -Ktn 'dst 10.9.0.1 and sport = :20911'" in redirect


def test_start_hurts_both_ends_of_each_link_and_stop_cleans_them() -> None:
    nodes = RecordingNodes(stats=json.dumps({"frames": 5, "duplicated": 1}))
    fault = packet.PacketFault(nodes, ("leader",), (("delay", "rate"),), MAGNITUDES)
    value = fault.start(random.Random(1))
    assert value["targets"] == ["n2"] and value["links"] == [["n1", "n2"], ["n2", "n3"]]
    assert value["mechanism"] == {"delay": "relay", "rate": "tc-htb"}
    assert value["mode"] == "delay+rate" and value["delay_ms"] == 200 and value["rate_kbit"] == 100
    assert any("10.9.0.1/32" in c and "10.9.0.3/32" in c for c in nodes.on("n2"))
    assert any("10.9.0.2/32" in c for c in nodes.on("n1"))
    assert not any("10.9.0.3" in c for c in nodes.on("n1"))
    assert value == packet.PacketFault(RecordingNodes(), ("leader",), (("delay", "rate"),),
                                       MAGNITUDES).start(random.Random(1))
    stopped = fault.stop()
    assert stopped["targets"] == NAMES
    assert stopped["relay"]["n1"] == {"frames": 5, "duplicated": 1}
    assert nodes.on("n1").count(packet.PROBE) == 1


def test_heal_cleans_every_node_and_leftovers_name_the_node() -> None:
    nodes = RecordingNodes()
    fault = packet.PacketFault(nodes, ("one",), (("loss",),), MAGNITUDES)
    fault.heal()
    assert all(packet.clean_command() in nodes.on(n) for n in NAMES)
    assert fault.leftovers() == ["n3: -A CHAOS-PACKET -s 10.9.0.1/32 -j DROP"]


def test_rate_without_htb_is_an_error_not_a_no_op() -> None:
    fault = packet.PacketFault(RecordingNodes(kinds=""), ("all",), (("rate",),), MAGNITUDES)
    with pytest.raises(RuntimeError, match="htb"):
        fault.start(random.Random(0))


# -- the relay, in this process on loopback ---------------------------------------------


def relay_run(settings_kw: dict, frames: list[bytes]) -> tuple[list[tuple[float, int]], relay.Stats, float]:
    """Send `frames` through a relay to a sink; what arrived (seconds after sending, request id)."""

    async def run() -> tuple[list[tuple[float, int]], relay.Stats, float]:
        arrived: list[tuple[float, int]] = []
        done = asyncio.Event()
        parser = FrameParser()
        expected = settings_kw.pop("expect")

        class Sink(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                arrived.extend((time.monotonic(), f.request_id) for f in parser.feed(data))
                if len(arrived) >= expected:
                    done.set()

        loop = asyncio.get_running_loop()
        sink = await loop.create_server(Sink, "127.0.0.1", 0)
        target = sink.sockets[0].getsockname()[:2]
        the_relay = relay.Relay(relay.Settings(target=target, **settings_kw), seed=3)
        server = await loop.create_server(lambda: relay.Downstream(the_relay), "127.0.0.1", 0)
        _, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
        sent = time.monotonic()
        writer.write(b"".join(frames))
        await asyncio.wait_for(done.wait(), 10)
        writer.close()
        server.close()
        sink.close()
        return [(t - sent, rid) for t, rid in arrived], the_relay.stats, sent

    return asyncio.run(run())


FRAMES = [encode_frame(1, i, b"x" * 10) for i in range(40)]


def test_relay_delays_in_order_without_reorder() -> None:
    arrived, stats, _ = relay_run({"delay_ms": 80, "jitter_ms": 40, "duplicate": 0.0, "reorder": False,
                                   "expect": 40}, FRAMES)
    assert [rid for _, rid in arrived] == list(range(40))
    assert min(t for t, _ in arrived) >= 0.04
    assert stats.frames == 40 and stats.reordered == 0 and stats.connections == 1


def test_relay_reorders_and_duplicates_but_keeps_the_first_frame_first() -> None:
    arrived, stats, _ = relay_run({"delay_ms": 50, "jitter_ms": 50, "duplicate": 0.5, "reorder": True,
                                   "expect": 45}, FRAMES)
    ids = [rid for _, rid in arrived]
    assert ids[0] == 0
    assert ids != sorted(ids) and stats.reordered > 0
    assert stats.duplicated > 5 and len(ids) - len(set(ids)) >= 5
