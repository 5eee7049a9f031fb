"""Fake clocks: the code under test's timeouts expire when the test says so, after the
fact it waits for (a pid file, output written), never because time passed on a busy
machine. ``asyncio.timeout()`` only: the ``manual_timeouts`` fixture (``conftest.py``);
everything on the event loop's clock: :class:`LoopClock`."""

from __future__ import annotations

import asyncio
from types import TracebackType

import pytest

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


class LoopClock:
    """The running event loop's clock, moved on by the test: :meth:`advance` makes time
    pass at once for every timer of the loop (``call_at``, ``asyncio.timeout``, a
    watchdog reading ``loop.time()``) while no real time passes. A limit far above any
    real wait (a minute) then expires exactly when the test moves the clock past it, and
    never because this machine was slow. Create it in the test (its loop is running)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        loop = asyncio.get_running_loop()
        self._real = loop.time
        self.offset = 0.0
        monkeypatch.setattr(loop, "time", self.time)

    def time(self) -> float:
        return self._real() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds
