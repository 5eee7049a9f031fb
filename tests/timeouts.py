"""A fake clock for ``asyncio.timeout()``: the code under test's timeouts expire when the
test says so, after the fact it waits for (a pid file, output written), never because
time passed on a busy machine. Use the ``manual_timeouts`` fixture (``conftest.py``)."""

from __future__ import annotations

import asyncio
from types import TracebackType

from .limits import eventually

_REAL_TIMEOUT = asyncio.timeout


class _ManualTimeout:
    """``async with asyncio.timeout(delay)`` that ignores ``delay``."""

    def __init__(self, owner: ManualTimeouts, delay: float | None) -> None:
        self._owner = owner
        self.delay = delay
        self._real: asyncio.Timeout | None = None

    async def __aenter__(self) -> asyncio.Timeout:
        self._real = _REAL_TIMEOUT(None)
        await self._real.__aenter__()
        self._owner.armed.append(self._real)
        return self._real

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._real is not None
        self._owner.armed.remove(self._real)
        await self._real.__aexit__(exc_type, exc, tb)


class ManualTimeouts:
    """Stands in for :func:`asyncio.timeout`; ``delays`` records what was asked for."""

    def __init__(self) -> None:
        self.delays: list[float | None] = []
        self.armed: list[asyncio.Timeout] = []

    def __call__(self, delay: float | None) -> _ManualTimeout:
        self.delays.append(delay)
        return _ManualTimeout(self, delay)

    async def expire(self) -> None:
        """Expire the timeouts now in force (waiting until one is)."""
        await eventually(lambda: bool(self.armed), "the code under test sets a timeout")
        now = asyncio.get_running_loop().time()
        for timeout in self.armed:
            timeout.reschedule(now)
