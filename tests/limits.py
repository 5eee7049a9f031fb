"""Every time limit of the tests, scaled by one factor.

Tests wait for observable facts (a message on the wire, a request seen by a fake server,
a pid file, a process gone from ``/proc``), never for time to pass. A limit only turns a
hang into a failure; it never decides whether a test passes, so the limits are generous:
sized for a two-core machine kept busy by other work (load average 6 to 14), where a
first prompt that imports a vendor's SDK under coverage has taken over 30 s. No test needs
more than the defaults; to give a slower machine more room, raise all of them at once::

    ACP_TEST_TIME_SCALE=3 python -m pytest

Timers of the code under test (grace periods, retry delays, start-up bounds) are set by
configuration or monkeypatched in the tests that meet them; they are not limits.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable


def _scale() -> float:
    raw = os.environ.get("ACP_TEST_TIME_SCALE", "").strip() or "1"
    try:
        value = float(raw)
    except ValueError:
        raise RuntimeError(f"ACP_TEST_TIME_SCALE must be a number, got {raw!r}") from None
    if not value > 0:
        raise RuntimeError(f"ACP_TEST_TIME_SCALE must be positive, got {raw!r}")
    return value


#: The factor applied to every limit (``ACP_TEST_TIME_SCALE``, default 1).
SCALE = _scale()


def limit(seconds: float) -> float:
    """``seconds`` scaled by ``ACP_TEST_TIME_SCALE``."""
    return seconds * SCALE


#: One wait for one fact: a response, a notification, a file, a process exit.
WAIT = limit(120)
#: A whole test (pytest-timeout), set on every test by ``conftest.py``.
TEST = limit(600)
#: A whole scenario another program drives (the interop clients, each step within
#: :data:`WAIT`): it ends before the test's own limit, so its report is what one reads.
SCENARIO = TEST - limit(60)
#: A configuration file giving the agent's wait for its MCP servers at a first prompt
#: (``limits.mcp-start-timeout``, 10 s by default) the room of one wait: a server's start
#: (an SDK imported, a process spawned) is a fact the prompt waits for, not a bound on
#: this machine's speed.
MCP_START = f"[limits]\nmcp-start-timeout = {WAIT}\n"
#: Poll interval of :func:`eventually` (it bounds latency, never correctness).
_POLL = 0.01


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """Wait until ``predicate()`` holds, for facts nothing announces (a process gone, a
    file another process writes); fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"still not true after {timeout:g} s: {what}")
        await asyncio.sleep(_POLL)


def eventually_sync(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """:func:`eventually` for synchronous tests."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout:g} s: {what}")
        time.sleep(_POLL)
