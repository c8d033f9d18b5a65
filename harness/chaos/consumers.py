"""Consumers: threads that read the log in order from offset 0, as RocketMQ's pull consumer does,
and record every pull in the history (`f` `consume`, see docs/formats.md's history contract).

A consumer keeps its consume offset (the next index it wants) and pulls up to `BATCH`
entries from one node at a time (seed 004's consumer failover):
* it starts at the master (the leader in DLedger mode);
* when its node does not answer, it pulls from another node (a slave, a follower);
* master-slave mode: it follows the node's `suggest` (the master sends a consumer that lags
  too far to a slave; a slave sends a caught-up consumer back to a live master);
* DLedger mode (no suggestion): after `RETURN_S` away it goes back to the leader the last
  answer named;
* when the master (leader) answers that the log ends before the consumer's offset (entries
  the consumer had were lost), the consumer rewinds to the log's end, as RocketMQ resets an
  offset that overflowed; the history line says `rewound`.
An answer with no entries makes the consumer wait `POLL_S` before it pulls again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.chaos.history import History
from nodes.client import Client, DefiniteFailure, IndeterminateFailure
from nodes.messages import Entry
from nodes.payload import payload_id

Consumed = tuple[int, str | None]  # one consumed entry: its log index and append id (None: a no-op)

BATCH = 64
POLL_S = 0.05
RETURN_S = 1.0


@dataclass(frozen=True)
class Pulled:
    """One pull's answer: consecutive entries from the asked offset, where to go on, and what
    the serving node knows (`end`: the last index it serves, None where the log's end never
    moves back, as committed Raft entries; `leader`; `suggest`)."""

    entries: list[Consumed]
    next_offset: int
    end: int | None
    node: str
    leader: str | None
    suggest: str | None


class Puller(Protocol):
    """How a consumer pulls in one mode; failures raise `DefiniteFailure` or `IndeterminateFailure`."""

    def pull(self, offset: int, node: str) -> Pulled: ...

    def close(self) -> None: ...


class HaPuller:
    """Master-slave mode: RocketMQ's pull (`nodes.client.Client.pull`), with its suggestion."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def pull(self, offset: int, node: str) -> Pulled:
        got = self.client.pull(offset, BATCH, node=node)
        return Pulled(consumed(got.entries), got.next_offset, got.max_offset, got.node, got.leader,
                      got.suggest)

    def close(self) -> None:
        self.client.close()


class RaftPuller:
    """DLedger mode: the node's own committed entries (a `follower` read on any node)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def pull(self, offset: int, node: str) -> Pulled:
        got = self.client.get(offset, offset + BATCH - 1, node=node, mode="follower")
        entries = consumed(e for e in got.entries if e.index <= got.commit_index)
        following = entries[-1][0] + 1 if entries else offset
        return Pulled(entries, following, None, got.node, got.leader, None)

    def close(self) -> None:
        self.client.close()


def consumed(entries: Iterable[Entry]) -> list[Consumed]:
    """Our node's entries as consumed entries."""
    return [(e.index, None if e.is_noop else payload_id(e.body)) for e in entries]


def pulled_value(consumer: int, offset: int, got: Pulled) -> dict[str, Any]:
    """The history value of an ok consume (without the committed `offset`)."""
    return {"consumer": consumer, "from": offset, "to": offset + len(got.entries) - 1,
            "entries": [list(e) for e in got.entries]}


class Consumer:
    """One consumer thread: process ids `first, first + stride, ...` (a fresh one after an info)."""

    def __init__(self, consumer: int, first_process: int, stride: int, names: Sequence[str], history: History,
                 stop: threading.Event, connect: Callable[[], Puller], rng: random.Random) -> None:
        self.consumer = consumer
        self.process = first_process
        self.stride = stride
        self.names = list(names)
        self.history = history
        self.stop = stop
        self.connect = connect
        self.rng = rng
        self.offset = 0
        self.home: str | None = None  # the master (leader) as the last answer named it
        self.target: str | None = None  # None: the home node
        self.away_since = 0.0

    def run(self) -> None:
        puller = self.connect()
        try:
            while not self.stop.is_set():
                node = self.target or self.home or self.rng.choice(self.names)
                done, got_entries = self.consume(puller, node)
                if not done:
                    puller.close()
                    self.process += self.stride
                    puller = self.connect()
                if not got_entries:
                    self.stop.wait(POLL_S)
        finally:
            puller.close()

    def consume(self, puller: Puller, node: str) -> tuple[bool, bool]:
        """One pull from `node`, recorded; (False when its outcome was unknown, whether it got entries)."""
        h, process = self.history, self.process
        asked = {"consumer": self.consumer, "from": self.offset}
        h.invoke(process, "consume", asked, node=node)
        try:
            got = puller.pull(self.offset, node)
        except (DefiniteFailure, IndeterminateFailure) as e:
            definite = isinstance(e, DefiniteFailure)
            h.complete(process, "fail" if definite else "info", "consume", asked, node=node,
                       error=str(e) or type(e).__name__)
            self.fail_over(node)
            return definite, False
        except Exception as e:  # a bug in the client must not leave an open invoke behind
            h.complete(process, "info", "consume", asked, node=node, error=f"client error: {e!r}")
            self.fail_over(node)
            return False, False
        value = pulled_value(self.consumer, self.offset, got)
        if got.end is not None and not got.entries and got.node == got.leader and self.offset > got.end + 1:
            self.offset = got.end + 1
            value["rewound"] = True
        else:
            self.offset = got.next_offset
        value["offset"] = self.offset
        h.complete(process, "ok", "consume", value, node=got.node)
        self.steer(got)
        return True, bool(got.entries)

    def fail_over(self, node: str) -> None:
        """The node did not answer: pull from another one next."""
        others = [n for n in self.names if n != node]
        self.target = self.rng.choice(others)
        self.away_since = time.monotonic()

    def steer(self, got: Pulled) -> None:
        """Where the next pull goes after an answer from `got.node`."""
        if got.leader:
            self.home = got.leader
        if got.suggest is not None:  # master-slave: the node says
            self.target = None if got.suggest == self.home else got.suggest
        elif self.target is not None and time.monotonic() - self.away_since >= RETURN_S:
            self.target = None  # DLedger: back to the leader


def start_consumers(consumers: int, first_process: int, stride: int, names: Sequence[str], seed: int,
                    history: History, stop: threading.Event,
                    connect: Callable[[], Puller]) -> list[threading.Thread]:
    """Start `consumers` daemon threads consuming until `stop` is set; consumer c's first process
    is `first_process + c`."""
    threads = []
    for c in range(consumers):
        consumer = Consumer(c, first_process + c, stride, names, history, stop, connect,
                            random.Random(f"{seed}/consumer/{c}"))
        thread = threading.Thread(target=consumer.run, name=f"consumer-{c}", daemon=True)
        thread.start()
        threads.append(thread)
    return threads
