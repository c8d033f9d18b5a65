"""Retention: which old data files to delete, and when to refuse appends (DISK_FULL).

DLedger deletes whole data files older than `fileReservedHours` (72 h) and, when the disk
fills (and `enableDiskForceClean` is on), older files regardless of age; above
`diskFullRatio` (90 %) it rejects appends. A file is deletable only if it lies entirely
before the segment holding the committed index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RetentionPolicy:
    """When to delete old data files and when to reject appends.

    `force_clean` False (DLedger's `enableDiskForceClean`) deletes files only once expired,
    however full the disk. `disk_usage` measures the used fraction of the store's file
    system (None: the store's `FileSystem.disk_use_ratio`; injectable for tests);
    `check_interval_s` is how often the store's background thread applies it (None: no
    thread, the caller calls `clean`).
    """

    reserved_s: float = 72 * 3600.0
    force_clean: bool = True
    force_clean_ratio: float = 0.85
    disk_full_ratio: float = 0.90
    check_interval_s: float | None = 10.0
    disk_usage: Callable[[Path], float] | None = None

    def __post_init__(self) -> None:
        if not 0 < self.force_clean_ratio <= self.disk_full_ratio <= 1:
            raise ValueError(
                f"need 0 < force_clean_ratio ({self.force_clean_ratio}) <= disk_full_ratio "
                f"({self.disk_full_ratio}) <= 1")
        if self.reserved_s < 0 or (self.check_interval_s is not None and self.check_interval_s <= 0):
            raise ValueError("reserved_s must be >= 0 and check_interval_s > 0 (or None)")

    def expired(self, mtimes: Iterable[float], now: float) -> int:
        """How many leading files (oldest first, by modification time) are past retention."""
        count = 0
        for mtime in mtimes:
            if now - mtime <= self.reserved_s:
                break
            count += 1
        return count
