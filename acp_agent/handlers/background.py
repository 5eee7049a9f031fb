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
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("background task failed", error=repr(task.exception()))
