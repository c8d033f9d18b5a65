"""The DataFrames every check reads, built once per check run, and op references for witnesses.

A witness names ops by their history `index` (invoke and completion) and time, so a person
can find them in history.jsonl.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.checks.finallogs import FinalLogs
from checkers.checks.history import History


@dataclass
class Tables:
    """History, final logs and what is derived from them, for histories `hid` 0..n-1.

    `linearizable` are the hids whose reads are held to linearizability (`layout`).
    """

    history: History
    finals: FinalLogs
    linearizable: frozenset[int] = frozenset()
    _derived: dict[str, DataFrame] = field(default_factory=dict, repr=False)

    def unpersist(self) -> None:
        """Drop every cached DataFrame of this check run."""
        self.history.unpersist()
        self.finals.unpersist()
        for frame in self._derived.values():
            frame.unpersist()
        self._derived.clear()

    def derived(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """The table `name`, built by `build` the first time and cached for the rest of the run:
        for what more than one pass reads (the first job that computes it fills the cache)."""
        if name not in self._derived:
            self._derived[name] = build().persist()
        return self._derived[name]

    @property
    def appends(self) -> DataFrame:
        return self.history.appends

    @property
    def reads(self) -> DataFrame:
        return self.history.reads

    @property
    def read_entries(self) -> DataFrame:
        return self.history.read_entries

    @property
    def consumes(self) -> DataFrame:
        return self.history.consumes

    @property
    def consume_entries(self) -> DataFrame:
        """hid, cid, log_index, id: every entry an ok consume got."""
        entries = self.consumes.select("hid", "cid", F.explode("entries").alias("e"))
        at, ident = F.col("e")[0].cast("long").alias("log_index"), F.col("e")[1].alias("id")
        return entries.select("hid", "cid", at, ident)

    def seen_entries(self, *, observed: bool = False) -> DataFrame:
        """hid, op, log_index, id: every entry an ok read or consume returned (op: its invoke's
        index), with `observed` also those that fail and info completions carried."""
        seen = self.read_entries.select("hid", F.col("rid").alias("op"), "log_index", "id")
        if self.history.consumed:
            consumed = self.consume_entries.select("hid", F.col("cid").alias("op"), "log_index", "id")
            seen = seen.unionByName(consumed)
        return seen.unionByName(self.history.observed) if observed else seen

    @property
    def cluster(self) -> DataFrame:
        """The cluster's final log: hid, log_index, term, id."""
        return self.finals.cluster

    @property
    def log_span(self) -> int:
        return max((max(ends.values(), default=-1) for ends in self.finals.ends.values()), default=-1) + 1

    @property
    def positions(self) -> DataFrame:
        """hid, id, pos: where each id sits in the cluster's final log (its lowest index)."""
        named = self.cluster.where(F.col("id").isNotNull())
        return named.groupBy("hid", "id").agg(F.min("log_index").alias("pos"))

    def known_positions(self) -> DataFrame:
        """hid, id, pos: where each appended id sits as far as anything says: the cluster's final
        log, else its acknowledged index, else the lowest index a read or consume saw it at."""
        seen = self.seen_entries().where(F.col("id").isNotNull()).groupBy("hid", "id").agg(
            F.min("log_index").alias("seen_at")
        )
        return (
            self.appends.select("hid", "id", "ack_index")
            .join(self.positions, ["hid", "id"], "left")
            .join(seen, ["hid", "id"], "left")
            .select("hid", "id", F.coalesce("pos", "ack_index", "seen_at").alias("pos"))
        )

    def claims(self, *, acks: bool) -> DataFrame:
        """hid, log_index, id, source, ref: every statement of which id an index holds.

        Sources: `read` (ref: the read's invoke index), `consume` (ref: the consume's invoke
        index), `observed` (what a fail or info read or consume carried; ref: its invoke
        index), `final:<node>`, and with `acks` the ok appends' acknowledged index (`ack`,
        ref: the append's invoke index; appends acknowledged without an index say nothing here).
        """
        reads = self.read_entries.select(
            "hid", "log_index", "id", F.lit("read").alias("source"), F.col("rid").alias("ref")
        )
        if self.history.consumed:
            reads = reads.unionByName(self.consume_entries.select(
                "hid", "log_index", "id", F.lit("consume").alias("source"), F.col("cid").alias("ref")
            ))
        reads = reads.unionByName(self.history.observed.select(
            "hid", "log_index", "id", F.lit("observed").alias("source"), F.col("op").alias("ref")
        ))
        finals = self.finals.entries.select(
            "hid",
            "log_index",
            "id",
            F.concat(F.lit("final:"), "node").alias("source"),
            F.lit(None).cast("long").alias("ref"),
        )
        claims = reads.unionByName(finals)
        if acks:
            ok = self.appends.where((F.col("status") == "ok") & F.col("ack_index").isNotNull()).select(
                "hid",
                F.col("ack_index").alias("log_index"),
                "id",
                F.lit("ack").alias("source"),
                F.col("inv_index").alias("ref"),
            )
            claims = claims.unionByName(ok)
        return claims


def append_ref(prefix: str = "") -> Column:
    """A reference to a row of `appends`: id, process, outcome, indexes and times."""
    c = lambda name: F.col(prefix + name)  # noqa: E731
    return F.struct(
        c("id").alias("id"),
        c("process").alias("process"),
        c("status").alias("type"),
        c("inv_index").alias("invoke_index"),
        c("inv_time").alias("invoke_time"),
        c("cmp_index").alias("complete_index"),
        c("cmp_time").alias("complete_time"),
        c("ack_index").alias("ack_index"),
    )


def consume_ref() -> Column:
    """A reference to a row of `consumes`: the consumer, where it pulled from, the offset it
    committed, the serving node, indexes and times."""
    return F.struct(
        F.col("consumer").alias("consumer"),
        F.col("process").alias("process"),
        F.col("node").alias("node"),
        F.col("cfrom").alias("from"),
        F.col("offset").alias("offset"),
        F.col("cid").alias("invoke_index"),
        F.col("inv_time").alias("invoke_time"),
        F.col("cmp_index").alias("complete_index"),
        F.col("cmp_time").alias("complete_time"),
    )


def read_ref(prefix: str = "") -> Column:
    """A reference to a row of `reads`: range asked, highest index seen, indexes and times."""
    c = lambda name: F.col(prefix + name)  # noqa: E731
    return F.struct(
        c("process").alias("process"),
        c("node").alias("node"),
        c("rfrom").alias("from"),
        c("rto").alias("to"),
        c("seen_max").alias("saw_up_to"),
        c("rid").alias("invoke_index"),
        c("inv_time").alias("invoke_time"),
        c("cmp_index").alias("complete_index"),
        c("cmp_time").alias("complete_time"),
    )
