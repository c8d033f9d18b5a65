"""NATS JetStream as a system under test (issue 35): the groundwork the system seam plugs in.

* `image`: `ensure_nats_image(client, base)`, the image with trixie's `nats-server` 2.10.27 (the one
  package taken from trixie) on the project's bookworm base, sshd and the nemesis's agents.
* `config`: `server_config(name, peers, sync_interval)`, one server's config in an N-server
  JetStream cluster (`sync_interval`: `always`, a duration, or `default` to leave it out).
* `protocol`: the NATS text protocol's framing, pure.
* `client`: a stdlib JetStream client: stream create, publish with `Nats-Msg-Id`, get by seq (leader
  or direct), stream info, leader step-down, whole-stream reads, `/jsz` per server.

What the history (docs/formats.md) records: an append `{"id"}` is a publish with `Nats-Msg-Id: id`;
its ok value `{"id", "log_index": seq - 1}` (no term: JetStream acknowledges none); a read
`{"from", "to"}` gets seqs `from + 1 .. to + 1`, its entries `[seq - 1, Nats-Msg-Id]`. Timeouts and
lost connections are `info`, JetStream's refusals (no responders, error replies) `fail`.
"""

from systems.nats.system import Nats, from_args

__all__ = ["Nats", "from_args"]
