"""etcd as a system under test (issue 35): the groundwork the system seam plugs in.

* `image`: the etcd image (bookworm's `etcd-server` on the project's base image);
* `config`: the etcd command line of one member of an N-member static cluster;
* `gateway`: the JSON bodies of etcd 3.4's gRPC gateway (`/v3/...`) and the parsing of its
  answers, pure;
* `client`: the log workload over that gateway (append, read, final read, leader, move-leader),
  stdlib only, with Jepsen's outcomes;
* `system`: `Etcd`, the system seam's plug-in (`harness.system.System`): a run's `harness.containers.db.Db`
  starts one member per node over SSH, as it starts any system's process.

How our log maps onto etcd's keyspace (the history format is docs/formats.md): an append of id
`x` is a transaction that creates the key `log/x` only if it does not exist. etcd's store
revision counts every write of the whole keyspace, densely, from 1 for the empty store, so
while only the workload writes, the revision that created `log/x` is one past the previous
append's: `log_index = create_revision - 2` numbers the appends 0, 1, 2, ... The append's ok
value is `{"id": x, "log_index": i}`. A retried append finds the key and answers the index of
the first, so retries never create duplicates. A read of `[from, to]` is a range over the prefix
`log/` filtered by create revision; its ok value is `{"from", "to", "commit_index", "entries"}`
with `entries` the `[log_index, id]` pairs and `commit_index` the answering member's revision
as an index. Reads are linearizable by default; serializable reads answer from one member's
own state, which is how the final read of each member's log is made.
"""

from systems.etcd.system import Etcd, from_args

__all__ = ["Etcd", "from_args"]
