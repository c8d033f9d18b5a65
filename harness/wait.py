"""Bounded waits on a condition (tenacity), never a bare sleep."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tenacity

from harness.errors import HarnessError

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, failure: str, interval: float = 0.1) -> T:
    """Call `check` every `interval` seconds until it returns something truthy; return that.

    HarnessError(`failure`) after `timeout` seconds. Exceptions from `check` propagate.
    """
    try:
        return tenacity.Retrying(stop=tenacity.stop_after_delay(timeout), wait=tenacity.wait_fixed(interval),
                                 retry=tenacity.retry_if_result(lambda value: not value))(check)
    except tenacity.RetryError as e:
        raise HarnessError(failure) from e
