"""The etcd command line of a static cluster's member (systems/etcd/config.py), pure."""

from __future__ import annotations

import pytest

from systems.etcd.config import ETCD_DIR, EtcdOptions, etcd_command

MEMBERS = {"n1": "10.0.0.2", "n2": "10.0.0.3", "n3": "10.0.0.4"}


def flags(argv: list[str]) -> dict[str, str]:
    return {arg[2:].partition("=")[0]: arg.partition("=")[2] for arg in argv[1:]}


def test_a_member_advertises_its_own_address_and_lists_every_member() -> None:
    argv = etcd_command("n2", MEMBERS)
    assert argv[0] == "/usr/bin/etcd"
    got = flags(argv)
    assert got["name"] == "n2"
    assert got["initial-advertise-peer-urls"] == "http://10.0.0.3:2380"
    assert got["advertise-client-urls"] == "http://10.0.0.3:2379"
    assert got["listen-peer-urls"] == "http://0.0.0.0:2380"
    assert got["listen-client-urls"] == "http://0.0.0.0:2379"
    assert got["initial-cluster"] == "n1=http://10.0.0.2:2380,n2=http://10.0.0.3:2380,n3=http://10.0.0.4:2380"
    assert got["initial-cluster-state"] == "new"
    assert got["data-dir"] == ETCD_DIR == "/var/lib/dledger/etcd"
    assert "unsafe-no-fsync" not in got


def test_every_member_agrees_on_the_cluster_and_its_token() -> None:
    shared = {"initial-cluster", "initial-cluster-token", "initial-cluster-state"}
    seen = [{key: value for key, value in flags(etcd_command(name, MEMBERS)).items() if key in shared}
            for name in MEMBERS]
    assert seen[0] == seen[1] == seen[2]


def test_options_set_unsafe_no_fsync_the_data_dir_and_timings() -> None:
    options = EtcdOptions(data_dir="/d/etcd", unsafe_no_fsync=True, token="t1", heartbeat_ms=50,
                          election_ms=500)
    got = flags(etcd_command("n1", {"n1": "dlc-x-n1"}, options))
    assert got["unsafe-no-fsync"] == ""
    assert (got["data-dir"], got["initial-cluster-token"]) == ("/d/etcd", "t1")
    assert (got["heartbeat-interval"], got["election-timeout"]) == ("50", "500")
    assert got["initial-cluster"] == "n1=http://dlc-x-n1:2380"


def test_a_member_outside_the_cluster_is_refused() -> None:
    with pytest.raises(ValueError, match="n4"):
        etcd_command("n4", MEMBERS)
