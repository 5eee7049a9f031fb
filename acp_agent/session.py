"""A session: its roots, mode, model, conversation history and running turns.

Everything a session shows the user goes through :meth:`Session.emit`, the single place
where updates leave for the client (and, with a store, are recorded).

Prompts on one session are serialized: a second ``session/prompt`` waits for the running
turn to end (first come, first served). ``session/cancel`` cancels the running turn and
every queued one; each answers ``cancelled``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable, Callable

from .protocol import types as t
from .providers.base import Message

Emit = Callable[[str, t.SessionUpdate], Awaitable[None]]


class Turn:
    """One prompt's lifetime; ``cancel`` is idempotent and safe at any moment."""

    __slots__ = ("cancel_requested", "task")

    def __init__(self, task: asyncio.Task[object] | None) -> None:
        self.task = task
        self.cancel_requested = False

    def cancel(self) -> None:
        if self.cancel_requested:
            return
        self.cancel_requested = True
        if self.task is not None and not self.task.done():
            self.task.cancel()


class Usage:
    """Running totals for the session (tokens in context, cumulative cost)."""

    __slots__ = ("context_tokens", "cost", "input_tokens", "output_tokens")

    def __init__(self) -> None:
        self.context_tokens = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = None


class Session:
    def __init__(
        self,
        id: str,
        cwd: str,
        emit_fn: Emit,
        *,
        mode: str = "ask",
        model: str = "offline",
        additional_directories: list[str] | None = None,
    ) -> None:
        self.id = id
        self.cwd = cwd
        self.emit_fn = emit_fn
        self.mode = mode
        self.model = model
        self.additional_directories = list(additional_directories or [])
        self.history: list[Message] = []
        self.usage = Usage()
        self.title: str | None = None
        self.turns: list[Turn] = []
        self.lock = asyncio.Lock()
        self._tool_ids = itertools.count(1)
        self._message_ids = itertools.count(1)

    @property
    def roots(self) -> list[str]:
        return [self.cwd, *self.additional_directories]

    def new_tool_call_id(self) -> str:
        return f"call_{next(self._tool_ids)}"

    def new_message_id(self) -> str:
        return f"msg_{self.id[-8:]}_{next(self._message_ids)}"

    async def emit(self, update: t.SessionUpdate) -> None:
        await self.emit_fn(self.id, update)

    def begin_turn(self) -> Turn:
        """Register the current task as a turn; call before the first ``await``."""
        turn = Turn(asyncio.current_task())
        self.turns.append(turn)
        return turn

    def current_turn(self) -> Turn | None:
        """The turn running in the current task, if any."""
        task = asyncio.current_task()
        return next((turn for turn in self.turns if turn.task is task), None)

    def end_turn(self, turn: Turn) -> None:
        if turn in self.turns:
            self.turns.remove(turn)

    def cancel(self) -> None:
        for turn in list(self.turns):
            turn.cancel()

    @property
    def busy(self) -> bool:
        return bool(self.turns)


def new_session_id() -> str:
    return "sess_" + os.urandom(12).hex()
