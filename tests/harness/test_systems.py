"""The system seam's flags: `--system` picks the system, its options are its own, and fault
families it cannot take are refused when named and left out of mixes, each with the reason."""

from __future__ import annotations

import pytest

from harness.chaos import flags
from harness.system import refusals
from nemesis import catalogue
from systems import SYSTEMS
from systems.dledger import Dledger
from systems.etcd import Etcd
from systems.nats import Nats


def parsed(*argv: str):
    return flags.parsed(list(argv), "python -m harness run")


def test_the_default_system_is_our_node_with_its_own_defaults() -> None:
    args = parsed()
    assert isinstance(args.under_test, Dledger)
    assert (args.system, args.mode, args.flush, args.timing, args.consumers) == ("dledger", "dledger", "sync",
                                                                                 "default", 1)
    assert args.read_mode == "mixed" and args.left_out == {}
    serve = list(args.under_test.serve_args)
    assert serve[serve.index("--read-mode") + 1] == "lease", "mixed runs start the nodes guarding leases"
    assert serve[serve.index("--flush") + 1] == "sync" and serve[serve.index("--timing") + 1] == "default"
    sync = parsed("--mode", "master-slave-sync", "--flush", "async").under_test
    assert sync.node_args["n2"][:4] == ["--mode", "master-slave", "--role", "SLAVE"]
    assert list(sync.serve_args)[1] == "async"


def test_nats_takes_its_sync_interval_and_leaves_dledger_options_unset() -> None:
    args = parsed("--system", "nats", "--nats-sync-interval", "always")
    system = args.under_test
    assert isinstance(system, Nats) and system.sync_interval == "always"
    assert (args.mode, args.flush, args.timing, args.consumers) == (None, None, None, 1)
    assert args.read_mode == "committed"
    assert system.inputs == ("history", "final-logs")
    assert parsed("--system", "nats").under_test.sync_interval == "default"


@pytest.mark.parametrize("argv, words", [
    (["--system", "nats", "--mode", "master-slave-sync"], "--mode: an option of --system dledger"),
    (["--system", "nats", "--flush", "async"], "--flush: an option of --system dledger"),
    (["--nats-sync-interval", "always"], "--nats-sync-interval: an option of --system nats"),
    (["--system", "nats", "--nats-sync-interval", "sometimes"], "expected `always`, `default` or a positive"),
    (["--system", "nats", "--read-mode", "lease"], "--system nats serves only committed"),
    (["--system", "nats", "--nemesis", "clock"], "--nemesis clock: --system nats cannot take it: "
                                                  "nats-server reads the kernel's clock"),
    (["--system", "nats", "--nemesis", "disk", "--disk-files", "data"],
     "--disk-files data: --system nats cannot take it: it keeps no data files (its own: blk)"),
    (["--system", "nats", "--nemesis", "churn", "--churn-modes", "prefer"],
     "--churn-modes prefer: --system nats cannot take it"),
    (["--system", "nats", "--mutant", "ack-before-quorum"], "--mutant: an option of --system dledger"),
])
def test_options_of_another_system_and_refused_families_are_bad_flags(argv: list[str], words: str) -> None:
    with pytest.raises(ValueError, match=None) as refused:
        parsed(*argv)
    assert words in str(refused.value)


def test_etcd_takes_its_unsafe_no_fsync_switch_and_reads_linearizably() -> None:
    args = parsed("--system", "etcd", "--etcd-unsafe-no-fsync")
    assert isinstance(args.under_test, Etcd) and args.under_test.unsafe_no_fsync is True
    assert args.read_mode == "linearizable" and args.consumers == 1
    assert parsed("--system", "etcd").under_test.unsafe_no_fsync is False
    with pytest.raises(ValueError, match="--etcd-unsafe-no-fsync: an option of --system etcd"):
        parsed("--system", "nats", "--etcd-unsafe-no-fsync")


def test_a_mix_leaves_out_what_the_system_cannot_take_and_says_why() -> None:
    args = parsed("--system", "nats", "--nemesis", "default")
    default = catalogue.mixes()["default"]
    assert set(args.left_out) == {"clock", "stale-leader"}
    assert args.faults == [name for name in default if name not in args.left_out]
    assert all(args.left_out[name] == Nats.refused[name] for name in args.left_out)


def test_a_default_option_loses_the_choices_the_system_cannot_take() -> None:
    args = parsed("--system", "nats", "--nemesis", "churn,disk")
    assert args.fault_options["churn_modes"] == ("transfer",) and args.churn_modes == "transfer"
    assert args.fault_options["disk_files"] == ("blk",)
    assert parsed("--system", "etcd", "--nemesis", "disk").fault_options["disk_files"] == ("wal",)
    ours = parsed("--nemesis", "churn,disk").fault_options
    assert ours["churn_modes"] == ("transfer", "prefer") and ours["disk_files"] == ("data", "index")


def test_every_refused_family_exists_and_every_system_is_listed() -> None:
    assert set(SYSTEMS) == {"dledger", "nats", "etcd"}
    assert set(Nats.refused) | set(Etcd.refused) <= set(catalogue.FAMILIES)
    assert refusals(Dledger(), list(catalogue.FAMILIES)) == {}
