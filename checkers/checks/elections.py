"""Election safety, leader completeness and vote durability from nodes/<node>/events.jsonl.

Election safety: at most one leader per term, and one leadership. A node announcing itself
leader of term T, and a node naming T's leader, are both claims about who led T; two
different names for one term break Raft's election safety, and so does one node announcing
itself leader of T twice (after a restart or a step-down: what it wrote in its first
leadership of T can differ from its second at the same (term, index)).

Leader completeness: a leader of term T holds every entry committed in an earlier term, so its
log (its role line's `end_index`, before its no-op) reaches at least every commit index a node
reported in a term below T (a commit line's term is the node's when it learned the index, at
least the term that committed it). A shorter log means a committed entry is gone from the
leader, and the next leader's entries overwrite it wherever it still is.

Forgotten votes: Raft saves `currentTerm` and `votedFor` before it answers a vote request,
so a node that restarts recovers (from its term file: its `start` line) at least the term it
last saved or voted in (its last `vote` line before the restart), and in that term the same
vote. A node that recovered less could vote again in that term for someone else, and two
leaders of one term follow. A `fresh` start (no term file, an empty store: a node whose data
was wiped) is not compared.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from checkers.checks.anomalies import anomaly_rows
from checkers.engine.sources import (
    SourceFile,
    expected_torn_lines,
    is_corrupt,
    raise_first_problem,
    read_jsonl,
)
from checkers.jsonlines import ROLES, event_line_problem
from checkers.layout import ResultsDir

EVENT_SCHEMA = StructType(
    [
        StructField("event", StringType()),
        StructField("time_ns", LongType()),
        StructField("real_ns", LongType()),
        StructField("node", StringType()),
        StructField("term", LongType()),
        StructField("role", StringType()),
        StructField("leader", StringType()),
        StructField("candidate", StringType()),
        StructField("vote", StringType()),
        StructField("fresh", BooleanType()),
        StructField("end_index", LongType()),
        StructField("commit_index", LongType()),
    ]
)
VOTE_EVENTS = ("vote", "start")


def load_events(spark: SparkSession, dirs: list[ResultsDir]) -> DataFrame:
    """Role-change, commit, vote and start lines of every node: hid, node, time_ns, real_ns,
    event, term, role, leader, end_index, commit_index, candidate, vote, fresh (the fields a
    kind lacks are null)."""
    files = [
        SourceFile(hid, path, node) for hid, d in enumerate(dirs) for node, path in d.event_logs().items()
    ]
    raw = read_jsonl(spark, files, EVENT_SCHEMA)
    role_line = F.col("role").isNotNull()
    vote_line = F.col("event") == "vote"
    start_line = F.col("event") == "start"
    commit_line = F.col("event") == "commit"
    bad = raw.where(
        is_corrupt()
        | (role_line & (~F.col("role").isin(*ROLES) | F.col("term").isNull()))
        | ((vote_line | start_line) & F.col("term").isNull())
        | (start_line & F.col("fresh").isNull())
        | (commit_line & (F.col("term").isNull() | F.col("commit_index").isNull()))
    ).count()
    if bad > expected_torn_lines(files):
        raise_first_problem(files, event_line_problem, bad)
    return raw.where(~is_corrupt() & (role_line | F.col("event").isin("commit", *VOTE_EVENTS))).select(
        "hid", F.coalesce("node", "src_node").alias("node"), "time_ns",
        F.coalesce("real_ns", "time_ns").alias("real_ns"), "event", "term", "role", "leader", "end_index",
        "commit_index", "candidate", "vote", "fresh",
    )


def election_safety(events: DataFrame) -> DataFrame:
    """One row per term that had two or more leaders, or a node that led it twice."""
    roles = events.where(F.col("role").isNotNull())
    claims = roles.withColumn(
        "claimed", F.when(F.col("role") == "leader", F.col("node")).otherwise(F.col("leader"))
    )
    leading = F.col("role") == "leader"
    rows = (
        claims.where(F.col("claimed").isNotNull())
        .groupBy("hid", "term")
        .agg(
            F.sort_array(F.collect_set("claimed")).alias("leaders"),
            F.count(F.when(leading, 1)).alias("leaderships"),
            F.size(F.collect_set(F.when(leading, F.col("node")))).alias("leading_nodes"),
            F.sort_array(F.collect_list(F.struct("time_ns", "node", "role", "leader"))).alias("said"),
        )
        .where((F.size("leaders") > 1) | (F.col("leaderships") > F.col("leading_nodes")))
    )
    return anomaly_rows(
        rows,
        "election-safety",
        F.col("term"),
        term=F.col("term"),
        leaders=F.col("leaders"),
        leaderships=F.col("leaderships"),
        events=F.slice("said", 1, 6),
    )


def forgotten_vote(events: DataFrame) -> DataFrame:
    """One row per start line that recovered less than the node's last vote line before it."""
    pledges = events.where(F.col("event").isin(*VOTE_EVENTS)).select(
        "hid", "node", "real_ns", "time_ns", "event", "fresh",
        F.when(F.col("fresh"), F.lit(-1)).otherwise(F.col("term")).alias("p_term"),
        F.when(F.col("event") == "vote", F.col("candidate")).otherwise(F.col("vote")).alias("p_vote"),
    )
    before = Window.partitionBy("hid", "node").orderBy("real_ns")
    prior = F.lag(F.struct("p_term", "p_vote", "time_ns"), 1).over(before)
    earlier_term = F.col("p_term") < F.col("prior.p_term")
    other_vote = (F.col("p_term") == F.col("prior.p_term")) & F.col("prior.p_vote").isNotNull() & ~F.col(
        "p_vote").eqNullSafe(F.col("prior.p_vote"))
    rows = pledges.withColumn("prior", prior).where(
        (F.col("event") == "start") & ~F.col("fresh") & (F.col("prior.p_term") >= 0)
        & (earlier_term | other_vote)
    )
    return anomaly_rows(
        rows,
        "forgotten-vote",
        F.col("real_ns"),
        node=F.col("node"),
        saved=F.struct(F.col("prior.p_term").alias("term"), F.col("prior.p_vote").alias("vote"),
                       F.col("prior.time_ns").alias("time_ns")),
        recovered=F.struct(F.col("p_term").alias("term"), F.col("p_vote").alias("vote"),
                           F.col("time_ns").alias("time_ns")),
    )


def leader_completeness(events: DataFrame) -> DataFrame:
    """One row per leader line whose log ended below an index committed in an earlier term."""
    commits = (
        events.where(F.col("event") == "commit").groupBy("hid", "term")
        .agg(F.max("commit_index").alias("committed"))
    )
    leaders = events.where((F.col("role") == "leader") & F.col("end_index").isNotNull()).alias("l")
    rows = (
        leaders.join(commits.alias("c"), (F.col("l.hid") == F.col("c.hid"))
                     & (F.col("c.term") < F.col("l.term")))
        .groupBy("l.hid", "l.node", "l.term", "l.end_index", "l.time_ns")
        .agg(F.max(F.struct("c.committed", F.col("c.term").alias("in_term"))).alias("c"))
        .where(F.col("c.committed") > F.col("end_index"))
    )
    return anomaly_rows(
        rows,
        "leader-completeness",
        F.col("term"),
        node=F.col("node"),
        term=F.col("term"),
        end_index=F.col("end_index"),
        committed=F.col("c.committed"),
        committed_in_term=F.col("c.in_term"),
        time_ns=F.col("time_ns"),
    )
