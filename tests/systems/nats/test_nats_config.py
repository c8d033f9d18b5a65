"""The nats-server config of a node: routes, store, monitoring port, and the `sync_interval` knob."""

from __future__ import annotations

import pytest

from systems.nats.config import MONITOR_PORT, parse_sync_interval, server_config

PEERS = {"n1": "dlc-r-n1", "n2": "dlc-r-n2", "n3": "dlc-r-n3"}


def test_routes_go_to_every_other_peer_and_the_store_is_on_the_data_dir() -> None:
    text = server_config("n2", PEERS)
    assert 'server_name: "n2"' in text
    assert '"nats-route://dlc-r-n1:6222"' in text and '"nats-route://dlc-r-n3:6222"' in text
    assert "dlc-r-n2:6222" not in text
    assert 'store_dir: "/var/lib/dledger"' in text
    assert f'http: "0.0.0.0:{MONITOR_PORT}"' in text
    assert text.count("{") == text.count("}") == 2


def test_default_leaves_sync_interval_out() -> None:
    assert "sync_interval" not in server_config("n1", PEERS)
    assert "sync_interval" not in server_config("n1", PEERS, "default")


@pytest.mark.parametrize("value", ["always", "10s", "500ms", "1m30s", "1.5h"])
def test_always_and_durations_are_written(value: str) -> None:
    assert f'  sync_interval: "{value}"\n' in server_config("n1", PEERS, value)


@pytest.mark.parametrize("value", ["", "0s", "10", "ten seconds", "-5s", "always ", "10 s", "2d"])
def test_bad_sync_intervals_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="always"):
        parse_sync_interval(value)


def test_a_lone_server_has_no_cluster_block() -> None:
    assert "cluster" not in server_config("n1", {"n1": "h"})


def test_the_server_must_be_a_peer() -> None:
    with pytest.raises(ValueError, match="n4"):
        server_config("n4", PEERS)
