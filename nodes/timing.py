"""Timing and limits of the consensus core, as named profiles with every value overridable.

`dledger` is DLedger's own timing (2000 ms heartbeat, leak 3, vote interval 300-1000 ms,
3000 ms RPC timeout: a 6 s failover). `fast` (the default) keeps the same shape scaled
down so a failover takes under half a second; unlike DLedger it randomises the follower
timeout (`follower_jitter_ms`) so followers of a dead leader do not all wake at once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Timing:
    """All durations in milliseconds of the node's own clock."""

    heartbeat_ms: float = 100.0
    heartbeat_leak: int = 3
    follower_jitter_ms: float = 150.0
    min_vote_interval_ms: float = 50.0
    max_vote_interval_ms: float = 200.0
    vote_wait_ms: float = 300.0
    take_leadership_min_vote_ms: float = 10.0
    take_leadership_max_vote_ms: float = 40.0
    transfer_timeout_ms: float = 1000.0
    transfer_max_lag: int = 1000
    push_timeout_ms: float = 300.0
    push_retry_ms: float = 30.0
    append_timeout_ms: float = 2000.0
    read_timeout_ms: float = 1000.0
    lease_drift_ratio: float = 0.1
    max_pending_appends: int = 10000
    max_inflight_pushes: int = 4
    max_batch_entries: int = 1024
    max_batch_bytes: int = 1 << 20
    preferred_check_ms: float = 500.0

    @property
    def leader_lost_ms(self) -> float:
        """A follower, or a leader without quorum contact, gives up after this long."""
        return self.heartbeat_ms * self.heartbeat_leak

    def validate(self) -> Timing:
        """Self, or ValueError naming the first inconsistent value."""
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"timing {f.name} must not be negative")
        if self.min_vote_interval_ms > self.max_vote_interval_ms:
            raise ValueError("timing min_vote_interval_ms must not exceed max_vote_interval_ms")
        if self.take_leadership_min_vote_ms > self.take_leadership_max_vote_ms:
            raise ValueError("timing take_leadership_min_vote_ms must not exceed take_leadership_max_vote_ms")
        if self.max_inflight_pushes < 1 or self.max_batch_entries < 1 or self.heartbeat_leak < 1:
            raise ValueError("timing max_inflight_pushes, max_batch_entries and heartbeat_leak must be >= 1")
        return self


PROFILES: dict[str, Timing] = {
    "fast": Timing(),
    "dledger": Timing(
        heartbeat_ms=2000.0, heartbeat_leak=3, follower_jitter_ms=0.0,
        min_vote_interval_ms=300.0, max_vote_interval_ms=1000.0, vote_wait_ms=3000.0,
        take_leadership_min_vote_ms=30.0, take_leadership_max_vote_ms=100.0,
        transfer_timeout_ms=6000.0, push_timeout_ms=3000.0, push_retry_ms=100.0,
        append_timeout_ms=2500.0, read_timeout_ms=3000.0, max_pending_appends=10000,
    ),
}


def timing_profile(name: str, **overrides: Any) -> Timing:
    """The profile `name` with `overrides` applied; ValueError for unknown names or fields."""
    if name not in PROFILES:
        raise ValueError(f"unknown timing profile {name!r}: use one of {', '.join(PROFILES)}")
    known = {f.name for f in fields(Timing)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown timing field(s) {', '.join(unknown)}: "
                         f"valid are {', '.join(sorted(known))}")
    return replace(PROFILES[name], **overrides).validate()


def parse_overrides(pairs: list[str]) -> dict[str, float]:
    """`FIELD=VALUE` texts as timing overrides (ints for count fields), or ValueError naming the bad one.

    Unknown field names pass through for `timing_profile` to reject with the list of valid ones.
    """
    kinds = {f.name: type(getattr(Timing(), f.name)) for f in fields(Timing)}
    overrides: dict[str, float] = {}
    for pair in pairs:
        name, _, value = (part.strip() for part in pair.partition("="))
        try:
            overrides[name] = kinds.get(name, float)(value)
        except ValueError:
            kind = "an integer" if kinds.get(name) is int else "a number"
            raise ValueError(f"timing override {pair!r} is not FIELD=VALUE with {kind} value "
                             f"(e.g. heartbeat_ms=500)") from None
    return overrides
