"""The power-loss fault on live containers: what was fsynced survives, the rest is gone.

File level first (write, fsync, mmap, msync on the lazyfs mount of one node), then both
halves of the node's durability contract on a 3-node cluster whose every node loses power
at once while clients append: with `--flush sync` no acknowledged append is lost, with
`--flush async` (DLedger's 10 ms background flush) some acknowledged appends are.
"""

from __future__ import annotations

import base64
import json
import random
import secrets
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.containers import cluster
from harness.containers.cluster import Removed, remove_labelled
from harness.containers.db import Db
from harness.errors import HarnessError
from harness.wait import wait_for
from nemesis.lagging import LaggingMajorityFault
from nemesis.power import LAZYFS, POWER_LOSS, PowerFault
from nodes.client import Client, ClientError
from systems.dledger import Dledger

pytestmark = pytest.mark.docker

FILES = "/var/lib/dledger/files"  # in the data dir: the lazyfs mount
STATE = "/run/lazyfs/var_lib_dledger.json"  # the daemon's pid and backing dir
WRITE_FILES = r"""
import mmap, os
os.makedirs("files", exist_ok=True)
os.chdir("files")

def put(name, data, sync, flags=os.O_TRUNC):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    os.write(fd, data)
    if sync:
        os.fsync(fd)
    os.close(fd)

def mapped(name, data, sync):
    fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 1 << 16)
    os.fsync(fd)
    with mmap.mmap(fd, 1 << 16) as m:
        m[100:100 + len(data)] = data
        if sync:
            m.flush()  # msync(MS_SYNC)
    os.close(fd)

put("synced", b"A" * 5000, True)
put("unsynced", b"B" * 5000, False)
put("tail", b"C" * 5000, True)
put("tail", b"D" * 3000, False, os.O_APPEND)
mapped("mapped-synced", b"E" * 5000, True)
mapped("mapped-unsynced", b"F" * 5000, False)
"""
READ_FILES = ("import base64, json, os; print(json.dumps({n: base64.b64encode(open(n, 'rb').read()).decode() "
              "for n in os.listdir('.')}))")
SEGMENTS = ["--segment-mb", "4"]  # the same in every test: a store cannot change its segment size
APPENDERS = 4
ASYNC_TRIALS = 10


def mapped(data: bytes) -> bytes:
    page = bytearray(1 << 16)
    page[100:100 + len(data)] = data
    return bytes(page)


def files(db: Db, node: str) -> dict[str, bytes]:
    out = db.exec(node, f"cd {FILES} && python3 -c {shlex.quote(READ_FILES)}")
    return {name: base64.b64decode(text) for name, text in json.loads(out).items()}


@pytest.fixture(scope="module")
def fuse3(node_image: str, node_serve: None) -> Iterator[Db]:
    """Three containers whose data dirs are lazyfs mounts; no node started yet."""
    with Db(3, image=node_image, fuse=True, serve_args=SEGMENTS) as db:
        yield db


@pytest.fixture
def power(fuse3: Db) -> Iterator[PowerFault]:
    """A power-loss fault hitting every node; healed after the test whatever happened."""
    fault = POWER_LOSS.make(fuse3, {"power_loss_targets": ("all",)})
    yield fault
    fault.heal()


def test_only_fsynced_writes_and_msynced_maps_survive_a_power_loss(fuse3: Db, power: PowerFault) -> None:
    for node in fuse3.names:
        fuse3.mount(node)
    fuse3.exec("n1", f"cd {fuse3.data_dir} && python3 -c {shlex.quote(WRITE_FILES)}")
    before = files(fuse3, "n1")  # everything is visible while the power is on
    assert before == {"synced": b"A" * 5000, "unsynced": b"B" * 5000, "tail": b"C" * 5000 + b"D" * 3000,
                      "mapped-synced": mapped(b"E" * 5000), "mapped-unsynced": mapped(b"F" * 5000)}

    value = power.start(random.Random(1))
    assert value["targets"] == fuse3.names
    dropped = value["dropped"]["n1"]
    assert dropped["files"] == 3 and dropped["bytes"] >= 5000 + 3000 + 5000

    after = files(fuse3, "n1")
    assert after == {"synced": b"A" * 5000, "unsynced": b"", "tail": b"C" * 5000,
                     "mapped-synced": mapped(b"E" * 5000), "mapped-unsynced": mapped(b"")}
    assert sorted(power.leftovers()) == sorted(f"{n}: the node process is not running" for n in fuse3.names)
    power.stop()
    assert power.leftovers() == []
    fuse3.exec("n1", f"rm -r {FILES}")


BEFORE_CUT = r"""
import os
for name, data in (("before-cut", b"A"), ("after-cut", b"")):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
"""
AFTER_CUT = r"""
import os
with open("/tmp/after-cut.pid", "w") as pid:
    pid.write(str(os.getpid()))
fd = os.open("after-cut", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"G" * 5000)
print("written", flush=True)
try:
    os.fsync(fd)
    print("fsync returned", flush=True)
except OSError as e:
    print("fsync failed", e.errno, flush=True)
"""


def test_a_cut_disk_holds_every_fsync_until_the_power_loss_kills_the_writer_in_it(
        fuse3: Db, power: PowerFault) -> None:
    """`lazyfs.py cut --at`: from the shared moment on nothing becomes durable (the fsync
    never returns: the power loss kills the writer in it), so nodes cut at one moment lose
    the same stretch however late they die, and no process learns of a failed fsync."""
    for node in fuse3.names:
        fuse3.mount(node)
    fuse3.exec("n1", f"mkdir -p {FILES} && cd {FILES} && python3 -c {shlex.quote(BEFORE_CUT)}")
    cut = json.loads(fuse3.exec("n1", f"python3 {LAZYFS} cut --at {time.time()!r} {fuse3.data_dir}"))
    assert cut["late_ms"] >= 0
    fuse3.exec("n1", f"cd {FILES} && (python3 -c {shlex.quote(AFTER_CUT)} > /tmp/after-cut.out 2>&1 &)")
    held = "/run/lazyfs/var_lib_dledger.held"
    wait_for(lambda: fuse3.exec("n1", f"cat {held} 2>/dev/null || echo 0").strip() != "0", 30,
             "the cut disk held no request of the writer within 30 s")
    cut_left = f"n1: the disk of lazyfs at {fuse3.data_dir} was cut at"
    assert any(line.startswith(cut_left) for line in power.leftovers())  # a heal would remount it
    writer = fuse3.exec("n1", "cat /tmp/after-cut.pid").strip()
    assert fuse3.exec("n1", "cat /tmp/after-cut.out").split() == ["written"]  # in the fsync

    value = power.start(random.Random(1))  # its own cut, later, leaves n1's earlier one in place
    assert sorted(value["late_ms"]) == fuse3.names
    assert value["dropped"]["n1"]["held"] >= 1 and value["dropped"]["n1"]["pages"] >= 2
    assert fuse3.exec("n1", f"test -e /proc/{writer} && echo alive || echo gone").strip() == "gone"
    assert fuse3.exec("n1", "cat /tmp/after-cut.out").split() == ["written"]  # died in it
    assert files(fuse3, "n1") == {"before-cut": b"A", "after-cut": b""}
    power.stop()
    fuse3.exec("n1", f"rm -r {FILES}")


def restart_with(db: Db, flush: str) -> None:
    """Stop every node (gracefully: all is flushed), then start them with `--flush flush`."""
    for node in db.names:
        db.stop(node)
    db.system = Dledger(["--flush", flush, *SEGMENTS])
    db.start()
    db.wait_for_leader()


def append_through_power_loss(db: Db, power: PowerFault | LaggingMajorityFault,
                              rng: random.Random) -> tuple[dict[int, bytes], dict[str, Any]]:
    """Appenders run until `power` starts under them (every node loses power); the acknowledged
    appends by index, and the start's value."""
    acked: dict[int, bytes] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def appender(worker: int) -> None:
        with Client(db.network_peers(), timeout=2) as client:
            for seq in range(1_000_000):
                if stop.is_set():
                    return
                body = f"w{worker}-{seq}-{rng.random()}".encode()
                try:
                    ack = client.append(body)
                except ClientError:
                    return
                with lock:
                    acked[ack.first_index] = body

    threads = [threading.Thread(target=appender, args=(w,), daemon=True) for w in range(APPENDERS)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(acked) >= 100, 30, "the appenders got no 100 acknowledgements in 30 s")
        value = power.start(rng)
        assert value["targets"] == db.names
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    return acked, value


def lost(db: Db, acked: dict[int, bytes]) -> list[int]:
    """The acknowledged indexes whose body is not in the committed log (read from the leader)."""
    first, last = min(acked), max(acked)

    def read() -> dict[int, bytes] | None:
        try:
            with Client(db.network_peers(), timeout=5) as client:
                found: dict[int, bytes] = {}
                start = first
                while start <= last:
                    result = client.get(start, last)
                    found.update((e.index, e.body) for e in result.entries)
                    start = result.last_index + 1
                return found
        except ClientError:
            return None

    log = wait_for(read, 30, "the restarted cluster does not serve reads within 30 s") or {}
    return sorted(index for index, body in acked.items() if log.get(index) != body)


def test_sync_flush_keeps_every_acknowledged_append_through_a_power_loss(fuse3: Db,
                                                                          power: PowerFault) -> None:
    restart_with(fuse3, "sync")
    acked, _ = append_through_power_loss(fuse3, power, random.Random(2))
    power.stop()
    fuse3.wait_for_leader()
    assert lost(fuse3, acked) == []
    assert power.leftovers() == []


def test_async_flush_loses_acknowledged_appends_in_a_power_loss(fuse3: Db, power: PowerFault) -> None:
    restart_with(fuse3, "async")
    rng = random.Random(3)
    losses: list[int] = []
    for _ in range(ASYNC_TRIALS):
        acked, _ = append_through_power_loss(fuse3, power, rng)
        power.stop()
        fuse3.wait_for_leader()
        losses = lost(fuse3, acked)
        if losses:
            break
    assert losses, f"no acknowledged append was lost in {ASYNC_TRIALS} power losses of the whole cluster"
    assert power.leftovers() == []


def test_lagging_majority_elects_among_one_powered_on_node_and_the_lagging_minority(fuse3: Db) -> None:
    """The recipe really leaves a majority of one node that lost its page cache and the nodes
    cut off before: they elect a leader while the others stay down, and a node that fsyncs
    before it acknowledges loses nothing acknowledged; stop powers the rest on."""
    restart_with(fuse3, "sync")
    fault = LaggingMajorityFault(fuse3, 0.5)
    try:
        acked, value = append_through_power_loss(fuse3, fault, random.Random(4))
        assert [s["step"] for s in value["steps"]] == ["partition", "power-off", "heal", "power-on"]
        minority, cut, back = value["minority"], value["cut"], value["back"]
        assert value["leader"] in cut and sorted(minority + cut) == fuse3.names and back in cut
        assert value["new_leader"] in [back, *minority], "the lagging majority elected no leader"
        down = sorted(set(cut) - {back})
        assert sorted(fault.leftovers()) == [f"{n}: the node process is not running" for n in down]
        assert not any(fuse3.running(n) for n in down) and fuse3.running(back)
        assert all(value["dropped"][n] is not None for n in cut)
        assert fault.stop()["targets"] == down
        assert fault.leftovers() == [] and all(fuse3.running(n) for n in fuse3.names)
        fuse3.wait_for_leader()
        assert lost(fuse3, acked) == []
    finally:
        fault.heal()


def test_heal_brings_back_the_power_and_a_dead_or_missing_file_system(fuse3: Db, power: PowerFault) -> None:
    restart_with(fuse3, "async")
    daemon = json.loads(fuse3.exec("n1", f"cat {STATE}"))["pid"]
    fuse3.exec("n1", f"kill -KILL {daemon}")  # n1's node goes on over a dead mount
    fuse3.kill("n2")
    fuse3.exec("n2", f"fusermount3 -uz {fuse3.data_dir}")
    left = set(power.leftovers())  # n1's node may also have died of its dead disk by now
    assert {f"n1: the lazyfs daemon of {fuse3.data_dir} (pid {daemon}) is dead",
            f"n2: lazyfs is not mounted at {fuse3.data_dir}", "n2: the node process is not running"} <= left
    node_pid = fuse3.process("n1").pid()
    power.heal()
    assert power.leftovers() == []
    assert fuse3.process("n1").pid() != node_pid  # restarted over the fresh mount
    with Client(fuse3.network_peers(), timeout=10) as client:
        client.append(b"after heal")


def test_the_logs_stay_off_the_lazyfs_mount_are_collected_and_teardown_leaves_nothing(
        docker_client: docker.DockerClient, node_image: str, node_serve: None, tmp_path: Path) -> None:
    with Db(1, image=node_image, fuse=True) as db:
        db.start()
        db.wait_for_leader()
        mounts = db.exec("n1", "cat /proc/mounts")
        assert f"lazyfs {db.data_dir} fuse.lazyfs" in mounts
        assert db.log_dir != db.data_dir and db.log_dir not in mounts
        assert {"node.log", "events.jsonl", "stdout.log"} <= set(db.exec("n1", f"ls {db.log_dir}").split())
        assert {"currterm", "data", "index"} <= set(db.exec("n1", f"ls {db.data_dir}").split())
        db.collect(tmp_path)
    collected = {path.relative_to(tmp_path / "nodes" / "n1").as_posix()
                 for path in (tmp_path / "nodes" / "n1").rglob("*") if path.is_file()}
    assert {"node.log", "events.jsonl", "stdout.log", "currterm", "data/00000000000000000000"} <= collected
    assert remove_labelled(docker_client, db.run_id) == Removed(0, 0, 0)  # teardown removed it all


def test_an_engine_without_the_fuse_device_is_a_clear_error_and_leaves_nothing(
        docker_client: docker.DockerClient, node_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The power-loss file system needs the Docker host's FUSE device; one that is missing is named,
    with what to do, instead of the engine's error escaping as a harness bug."""
    monkeypatch.setattr(cluster, "FUSE_DEVICE", "/dev/no-fuse-here")
    run_id = f"nofuse-{secrets.token_hex(3)}"
    doomed = cluster.Cluster(docker_client, run_id, 1, node_image, "ssh-ed25519 AAAA test", fuse=True)
    try:
        with pytest.raises(HarnessError, match=r"cannot give /dev/no-fuse-here to a container .*"
                                               r"modprobe fuse\), or run without the power-loss family"):
            doomed.create()
    finally:
        removed = doomed.remove()
    assert removed.containers == 1 and removed.networks == 1
    assert docker_client.containers.list(all=True, filters={"label": f"{cluster.LABEL_RUN}={run_id}"}) == []
