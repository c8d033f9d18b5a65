"""Waiting on a condition with a bound, for tests that talk to live nodes."""

from __future__ import annotations

from collections.abc import Callable

from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

from nodes.client import ClientError


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `predicate` (ClientError counts as False) until true; AssertionError naming `what`."""
    @retry(stop=stop_after_delay(timeout), wait=wait_fixed(0.05), reraise=True,
           retry=retry_if_exception_type((AssertionError, ClientError)))
    def check() -> None:
        assert predicate(), f"not yet: {what}"
    check()
