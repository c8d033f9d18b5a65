"""Checks on what the log holds: lost, recovered, aborted read, phantom, duplicate, index
mismatch (one grouping by id), divergence (a grouping by index), hole (a per-node scan) and
answers that contradict their requests.

Reads, consumes, acknowledgements and final logs are all statements of which id an index
holds; each rule takes every statement that bears on it, so the history alone decides them
and the final logs add evidence.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.checks.anomalies import anomalies_where, anomaly, anomaly_rows
from checkers.checks.blocksums import NOOP_KEY
from checkers.checks.tables import Tables, append_ref, consume_ref, read_ref


def _claim() -> F.Column:
    return F.struct("log_index", "source", F.col("ref").alias("history_index"))


def _named_claims(t: Tables) -> DataFrame:
    """Claims by reads, consumes and final logs that name an id (no-ops excluded)."""
    return t.claims(acks=False).where(F.col("id").isNotNull())


def covered(t: Tables) -> DataFrame:
    """hid, id, cover: acknowledged appends that the history shows lost (no final log needed).

    An ok append's position is its acknowledged index, else the lowest index anything saw it
    at. It is lost, unless the cluster's final log (read after every op) holds it, when
      * the last ok read or consume that returned an entry at its position was invoked after
        it was acknowledged, and nothing seen from that op on holds it (the index now holds
        something else), or
      * nothing ever returned it (not even a fail or info op's answer), yet an ok read or
        consume invoked after it was acknowledged went past its position (`history.covers`:
        from where it started to the highest index it returned), or, its position unknown,
        read the whole log from 0 (in histories held to linearizability). Jepsen's lost write:
        a poll went past its offset and no poll ever returned it.
    `cover` is the history index of the op that shows it.
    """
    last_seen = t.seen_entries(observed=True).where(F.col("id").isNotNull()).groupBy("hid", "id").agg(
        F.max("op").alias("last_seen"), F.min("log_index").alias("seen_at")
    )
    at = t.seen_entries().groupBy("hid", F.col("log_index").alias("p")).agg(F.max("op").alias("entry_cover"))
    spans = t.reads.select("hid", F.col("rid").alias("op"), F.explode("covers").alias("p"))
    if t.history.consumed:
        pulled = t.consumes.select("hid", F.col("cid").alias("op"), F.explode("covers").alias("p"))
        spans = spans.unionByName(pulled)
    past = spans.groupBy("hid", "p").agg(F.max("op").alias("span_cover"))
    held = F.col("hid").isin(*t.linearizable) if t.linearizable else F.lit(False)
    whole = t.reads.where(F.col("whole") & (F.col("rfrom") <= 0) & held)
    last_whole = whole.groupBy("hid").agg(F.max("rid").alias("whole_cover"))
    acked = t.appends.where(F.col("status") == "ok").select("hid", "id", "ack_index", "cmp_index")
    rows = (
        acked.join(last_seen, ["hid", "id"], "left")
        .withColumn("p", F.coalesce("ack_index", "seen_at"))
        .join(at, ["hid", "p"], "left")
        .join(past, ["hid", "p"], "left")
        .join(F.broadcast(last_whole), "hid", "left")
    )
    done, entry_cover = F.col("cmp_index"), F.col("entry_cover")
    replaced = (entry_cover > done) & (F.coalesce("last_seen", F.lit(-1)) < entry_cover)
    went_past = F.when(F.col("p").isNull(), F.col("whole_cover")).otherwise(F.col("span_cover"))
    never_seen = F.col("last_seen").isNull() & (went_past > done)
    cover = F.when(replaced, entry_cover).when(never_seen, went_past)
    return rows.select("hid", "id", cover.alias("cover")).where(F.col("cover").isNotNull())


def _groups(t: Tables) -> DataFrame:
    """Every fact about an id (its append, what reads, consumes and final logs claim, where the
    cluster's final log holds it, whether the history shows it lost) grouped by (hid, id), with
    `lost`; cached for the run (`by_id` and `lost_where` both read it)."""
    return t.derived("groups by id", lambda: _grouped(t))


def _grouped(t: Tables) -> DataFrame:
    appended = t.appends.select("hid", "id", append_ref().alias("app"))
    history_sources = F.col("source").isin("read", "consume", "observed")
    claimed = _named_claims(t).select(
        "hid",
        "id",
        _claim().alias("claim"),
        F.when(F.col("source") == "read", F.col("ref")).alias("rid"),
        F.when(history_sources, F.col("log_index")).alias("hclaim"),
        (F.col("source") != "observed").cast("int").alias("answered"),
    )
    placed = t.cluster.where(F.col("id").isNotNull()).select("hid", "id", F.col("log_index").alias("at"))
    facts = (
        appended.unionByName(claimed, allowMissingColumns=True)
        .unionByName(placed, allowMissingColumns=True)
        .unionByName(covered(t), allowMissingColumns=True)
    )
    ids = facts.groupBy("hid", "id").agg(
        F.max("app").alias("app"),
        F.min("claim").alias("first"),
        F.max("claim").alias("second"),
        F.min("rid").alias("seen_by_read"),
        F.min("at").alias("pos"),
        F.collect_set("at").alias("held_at"),
        F.collect_set("hclaim").alias("seen_at"),
        F.max("cover").alias("cover"),
        F.max("answered").alias("answered"),
    )
    has_final_log = F.col("hid").isin(*t.finals.longest) if t.finals.longest else F.lit(False)
    ok = F.col("app")["type"] == "ok"
    not_kept = has_final_log & F.col("pos").isNull() & (ok | F.col("seen_by_read").isNotNull())
    # The final logs are read after every op: when they hold the id, they are its last cover.
    shown = F.col("cover").isNotNull() & F.col("pos").isNull()
    return ids.withColumn("lost", F.coalesce(not_kept, F.lit(False)) | shown)


def by_id(t: Tables) -> DataFrame:
    """lost, recovered, aborted-read, phantom, duplicate and index-mismatch, from one grouping by id.

    Every fact about an id is grouped by (hid, id) once (`_groups`); each check is a
    condition on the group.
    """
    ids = _groups(t)
    app, first, pos = F.col("app"), F.col("first"), F.col("pos")
    landed = pos.isNotNull()
    ident = F.col("id")
    ack = app["ack_index"]
    elsewhere = F.exists("seen_at", lambda i: i != ack)
    return anomalies_where(
        ids,
        [
            (
                F.col("lost"),
                anomaly(
                    "lost",
                    F.coalesce(app["invoke_index"], F.col("seen_by_read")),
                    id=ident,
                    append=app,
                    seen_by_read=F.col("seen_by_read"),
                    covered_by=F.col("cover"),
                ),
            ),
            (
                (app["type"] == "info") & landed,
                anomaly("recovered", app["invoke_index"], id=ident, final_index=pos, append=app),
            ),
            (  # what a failed or unknown read carried is no read of a failed append's entry
                (app["type"] == "fail") & (F.col("answered") == 1),
                anomaly("aborted-read", app["invoke_index"], id=ident, append=app, seen=first),
            ),
            (app.isNull() & first.isNotNull(), anomaly("phantom", first["log_index"], id=ident, seen=first)),
            (
                first["log_index"] != F.col("second")["log_index"],
                anomaly("duplicate", first["log_index"], id=ident, first=first, second=F.col("second")),
            ),
            (
                (app["type"] == "ok")
                & ack.isNotNull()
                & ((landed & ~F.array_contains("held_at", ack)) | elsewhere),
                anomaly(
                    "index-mismatch",
                    app["invoke_index"],
                    id=ident,
                    ack_index=ack,
                    final_index=pos,
                    seen_at=F.array_sort("seen_at"),
                    append=app,
                ),
            ),
        ],
    )


def lost_where(t: Tables) -> dict[int, dict[str, int]]:
    """hid -> where its lost appends sit in the acknowledged log, in acknowledgement order (as
    Jepsen's NATS analysis counts them): `prefix` before the first acknowledged append that
    was kept, `postfix` after the last, `middle` between; `all` when none was kept.

    When every history has final logs, an acknowledged append is lost exactly when the
    cluster's log does not hold it (`_grouped`), which needs no grouping by id.
    """
    if t.history.stats.keys() <= t.finals.longest.keys():
        ok = t.appends.where(F.col("status") == "ok").join(t.positions, ["hid", "id"], "left")
        acked = ok.select("hid", F.col("cmp_index").alias("done"), F.col("pos").isNull().alias("lost"))
    else:
        acked = _groups(t).where(F.col("app")["type"] == "ok").select(
            "hid", F.col("app")["complete_index"].alias("done"), "lost"
        )
    kept = acked.where(~F.col("lost")).groupBy("hid").agg(
        F.min("done").alias("lo"), F.max("done").alias("hi")
    )
    place = (
        F.when(F.col("hi").isNull(), "all")
        .when(F.col("done") < F.col("lo"), "prefix")
        .when(F.col("done") > F.col("hi"), "postfix")
        .otherwise("middle")
    )
    rows = (
        acked.where(F.col("lost")).join(kept, "hid", "left")
        .groupBy("hid", place.alias("where")).count().collect()
    )
    where: dict[int, dict[str, int]] = {}
    for row in rows:
        where.setdefault(row["hid"], {"prefix": 0, "middle": 0, "postfix": 0})[row["where"]] = row["count"]
    return where


def covers(t: Tables, ids: list[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """(hid, id) -> `covered_by` of a lost witness (`covered`), for the acknowledged appends `ids`
    that the history shows lost."""
    if not ids:
        return {}
    wanted = t.appends.sparkSession.createDataFrame(ids, "hid long, id string")
    rows = covered(t).join(F.broadcast(wanted), ["hid", "id"]).collect()
    return {(row["hid"], row["id"]): row["cover"] for row in rows}


def never_read(t: Tables, hids: list[int]) -> dict[int, int]:
    """hid -> how many acknowledged appends (distinct ids) of histories `hids` no read or
    consume ever returned: not an ok read's or consume's entries, nor what a fail or info one
    carried. Jepsen's drain count, said when no final log can tell whether they were kept."""
    if not hids:
        return {}
    mine = F.col("hid").isin(*hids)
    acked = t.appends.where((F.col("status") == "ok") & mine).select("hid", "id").distinct()
    seen = t.seen_entries(observed=True).where(mine & F.col("id").isNotNull()).select("hid", "id")
    rows = acked.join(seen.distinct(), ["hid", "id"], "left_anti").groupBy("hid").count().collect()
    return {hid: 0 for hid in hids} | {row["hid"]: row["count"] for row in rows}


def divergence(t: Tables) -> DataFrame:
    """One log index holding different ids across acks, reads and the nodes' final logs."""
    claims = t.claims(acks=True).withColumn("idkey", F.coalesce("id", F.lit(NOOP_KEY)))
    per_id = claims.groupBy("hid", "log_index", "idkey").agg(
        F.max("id").alias("id"),
        F.count("*").alias("claims"),
        F.min(F.struct("source", F.col("ref").alias("history_index"))).alias("example"),
    )
    rows = (
        per_id.groupBy("hid", "log_index")
        .agg(
            F.count("*").alias("ids"),
            F.sort_array(F.collect_list(F.struct("id", "claims", "example"))).alias("held"),
        )
        .where(F.col("ids") > 1)
    )
    return anomaly_rows(
        rows, "divergence", F.col("log_index"), log_index=F.col("log_index"), held=F.slice("held", 1, 5)
    )


def malformed_answer(t: Tables) -> DataFrame:
    """An ok read or consume whose entries contradict its own request (`history.contradicts`)."""
    reads = anomaly_rows(t.reads.where(F.col("malformed")), "malformed-answer", F.col("rid"), read=read_ref())
    if not t.history.consumed:
        return reads
    consumes = anomaly_rows(t.consumes.where(F.col("malformed")), "malformed-answer", F.col("cid"),
                            consume=consume_ref(), entries=F.slice("entries", 1, 20))
    return reads.unionByName(consumes)


def uncommitted_read(t: Tables) -> DataFrame:
    """An ok read that returned an entry past the commit index it reported with it."""
    rows = t.reads.where(F.col("uncommitted"))
    return anomaly_rows(rows, "uncommitted-read", F.col("rid"), read=read_ref(),
                        commit_index=F.col("commit_index"))


def hole(t: Tables) -> DataFrame:
    """A gap below the highest index of a node's final log, or inside an ok read's entries."""
    by_node = Window.partitionBy("hid", "node").orderBy("log_index")
    present = t.finals.entries.select("hid", "node", "log_index")
    gaps = present.withColumn("before", F.coalesce(F.lag("log_index").over(by_node), F.lit(-1))).where(
        F.col("log_index") - F.col("before") > 1
    )
    final_holes = anomaly_rows(
        gaps,
        "hole",
        F.col("before") + 1,
        node=F.col("node"),
        missing_from=F.col("before") + 1,
        missing_to=F.col("log_index") - 1,
    )
    read_gaps = anomaly_rows(t.reads.where(F.col("gap")), "hole", F.col("rid"), read=read_ref())
    return final_holes.unionByName(read_gaps)
