"""Work a handler starts and does not wait for (announcements, MCP servers closing,
connections opened ahead): kept referenced until done, failures logged."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from .. import log


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def __call__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.start(coro)

    async def settled(self) -> None:
        """Wait until none of the work is under way (work started meanwhile included)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def start(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """:meth:`__call__`, returning the task (it has not run yet)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)
        return task


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("background task failed", error=repr(task.exception()))
