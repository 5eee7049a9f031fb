"""The warm-up: what a first prompt would otherwise do on the event loop, done ahead.

Started (once) after the ``initialize`` reply is written, never on the event loop: the
process edge's imports run in a worker thread (``server.warm``:
the late-loaded handlers, then, once a session is open, the engine, the tools and the
configured model's SDK), then the configured model's provider readies its first request.
Turns wait for it (:meth:`Warmup.warmed`) without blocking the event loop, rather than
import on it. Each opened session's first turn is readied too (``turns.Turns.prepare``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from .. import log


class Warmup:
    def __init__(
        self, imports: Callable[[], None] | None, then: Callable[[], Awaitable[None]]
    ) -> None:
        self._imports = imports
        self._then = then
        self._warming: asyncio.Future[None] | None = None
        self.opened = threading.Event()
        """Set once a session is open (the warm-up imports the SDK after that)."""
        self.waiting = 0
        """Turns waiting for the warm-up now (what only saves a later turn's time is
        skipped while one does)."""

    def start(self) -> None:
        """Start the warm-up, once: the imports in a thread, then ``then`` (the configured
        model's provider readied)."""
        if self._warming is None and self._imports is not None:
            self._warming = asyncio.ensure_future(self._run(self._imports, self._then))

    @property
    def started(self) -> asyncio.Future[None] | None:
        return self._warming

    async def _run(self, imports: Callable[[], None], then: Callable[[], Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        try:
            start = loop.time()
            await loop.run_in_executor(None, imports)
            imported = loop.time()
            await then()
            log.debug("warmed up", imports=round(imported - start, 3),
                      prepare=round(loop.time() - imported, 3))  # fmt: skip
        except Exception as exc:  # warming only saves time: the first turn does it anyway
            log.warning("warm-up failed", error=repr(exc))

    async def warmed(self, turn: bool = True) -> None:
        """Wait for the warm-up, started now if it has not been (``turn``: a turn waits,
        so what only saves a later turn's time is skipped). Never racing it: what it
        imports, the caller would import too, and a package imported by two threads at
        once can fail in one of them."""
        self.start()
        warming = self._warming
        if warming is not None and not warming.done():
            self.waiting += turn
            try:
                await asyncio.shield(warming)
            finally:
                self.waiting -= turn
