"""A session: its roots, mode, model, conversation history and running turns.

Everything a session shows the user goes through :meth:`Session.emit`, the single place
where updates leave for the client and are recorded in the session's log; every change to
the model's history goes through :meth:`Session.add_message`,
:meth:`Session.truncate_history` or :meth:`Session.replace_history`, which record it too.
A session without a log (the store could not be written) works the same, in memory only.
A session whose log another process owns is ``read_only``: it can be replayed, not
prompted.

Prompts on one session are serialized: a second ``session/prompt`` waits for the running
turn to end (first come, first served). ``session/cancel`` cancels the running turn and
every queued one; each answers ``cancelled``.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from ..conversation import Message, apply_stubs, message_chars
from ..protocol import UNSET
from ..protocol import types as t
from ..providers.history import HistoryCache
from ..providers.models import cost
from .offers import ClientPrompt, PromptCommand, SkillEntry
from .records import (
    AddMessage,
    Checkpoint,
    Instructions,
    Prompt,
    PruneResults,
    ReplaceHistory,
    Rewind,
    Roots,
    Settings,
    Touched,
    TruncateHistory,
    TurnEnd,
    Undone,
    Update,
    UsageTotals,
    now_iso,
)
from .replay import State
from .steers import Steers
from .store import SessionLog
from .turnlog import TurnLog

if TYPE_CHECKING:
    from ..mcp import McpHub
    from ..providers.base import UsageReport
    from ..providers.models import ModelInfo

Emit = Callable[[str, t.SessionUpdate], Awaitable[None]]


class Turn:
    """One prompt's lifetime; ``cancel`` is idempotent and safe at any moment. ``steers``:
    the messages sent into it while it runs (see ``steers``)."""

    __slots__ = ("cancel_requested", "steers", "task")

    def __init__(self, task: asyncio.Task[object] | None) -> None:
        self.task = task
        self.cancel_requested = False
        self.steers = Steers()

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

    def add_spent(self, usage: UsageReport, info: ModelInfo | None) -> None:
        """Count a request's tokens and price into the totals (not the context)."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        spent = cost(info, usage) if info is not None else None
        if spent is not None:
            self.cost = (self.cost or 0.0) + spent


class Session:
    def __init__(
        self,
        id: str,
        cwd: str,
        emit_fn: Emit,
        *,
        mode: str = "ask",
        model: str = "offline",
        thinking: str = "off",
        additional_directories: list[str] | None = None,
        sandbox: str = "workspace-write",
    ) -> None:
        self.id = id
        self.cwd = cwd
        self.emit_fn = emit_fn
        self.mode = mode
        self.model = model
        self.thinking = thinking
        self.sandbox = sandbox
        """The sandbox level ``auto`` mode runs commands at (the ``sandbox`` option)."""
        self.additional_directories = list(additional_directories or [])
        self.history: list[Message] = []
        self._counted: tuple[list[Message] | None, int, int] = (None, 0, 0)
        """What :meth:`history_tokens` has counted: (the list, its first messages, chars)."""
        self.history_cache = HistoryCache()
        """What the providers keep of the history between requests (``providers.history``)."""
        self.usage = Usage()
        self.title: str | None = None
        self.titled_by_client = False
        """The title is the client's (``session/set_title``): never named automatically."""
        self.first_prompt: str | None = None
        self.turns: list[Turn] = []
        self._cancelled_early: weakref.WeakSet[asyncio.Task[object]] = weakref.WeakSet()
        self.lock = asyncio.Lock()
        self.log: SessionLog | None = None
        self.read_only = False
        self._tool_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self.stored_roots = (self.cwd, self.additional_directories)
        """The roots the log holds; other roots (from a load) are recorded on first use."""
        self._saved_usage: tuple[int, int, int, float | None] = (0, 0, 0, None)
        self.mcp: McpHub | None = None
        """The session's MCP servers (started in the background), if the client gave any."""
        self.pending_notices: list[tuple[str, str, str | None]] = []
        """Advisories to send once the client has the session (after the response)."""
        self.prompt_commands: Mapping[str, PromptCommand] = {}
        """User-defined slash commands (markdown files), loaded when the session opens."""
        self.skills: Mapping[str, SkillEntry] = {}
        """The Agent Skills found (``engine.skills``), looked up again before each turn."""
        self.skills_told: Mapping[str, str] | None = None
        """What the model knows of the skills (name -> its line in the catalogue)."""
        self.skills_in_prompt: Mapping[str, str] | None = None
        """What the system prompt's catalogue says (the model knows it after a compaction)."""
        self.skill_problems: frozenset[tuple[str, str]] = frozenset()
        """The broken skill files the user was told of (file, problem)."""
        self.client_prompt: ClientPrompt | None = None
        """The client's ``systemPrompt`` (see ``instructions``)."""
        self.system_text: str | None = None
        """The system prompt, built on first use and kept (see ``instructions``)."""
        self.told_mode: str | None = None
        """The mode the model was last told of."""
        self.window_limit: int | None = None
        """A smaller context window than the model table's, as the server said."""
        self.frame_tokens = 0
        """Estimated tokens of the system prompt and tools every request carries."""
        self.compact_after = 0
        """No automatic compaction below this many tokens (a compaction just failed)."""
        self.unsaved_told = False
        """The user was told this session is not being saved (see ``lifecycle``)."""
        self.parent: Session | None = None
        """The session that spawned this one, if it is a subagent's (see ``subagents``)."""
        self.turnlog = TurnLog()
        """Its prompts, workspace checkpoints and what was taken back (``/undo``)."""
        self.recorder: object | None = None
        """The running turn's workspace recorder (``engine.checkpoints``), if any."""

    def restore(self, state: State) -> None:
        """Take the state a log holds (the roots stay as the session has them)."""
        self.history = list(state.history)
        self.title, self.titled_by_client = state.title, state.titled_by_client
        self.first_prompt = state.first_prompt
        u = state.usage
        self.usage.context_tokens, self.usage.cost = u.context_tokens, u.cost
        self.usage.input_tokens, self.usage.output_tokens = u.input_tokens, u.output_tokens
        self._saved_usage = (u.context_tokens, u.input_tokens, u.output_tokens, u.cost)
        if state.cwd:
            self.stored_roots = (state.cwd, list(state.additional_directories))
        if state.instructions is not None:
            self.client_prompt = ClientPrompt(state.instructions.mode, state.instructions.text)
        self._tool_ids = itertools.count(state.next_tool_id)
        self._message_ids = itertools.count(state.next_message_id)
        self.turnlog = state.turnlog

    def history_tokens(self) -> int:
        """``estimate_tokens(self.history)``, kept as the history grows: the messages
        appended since the last call are counted, the rest is not walked again. Any
        other change (a truncation, stubs, a compaction, a load) starts the count over:
        those replace the list, or forget the count (:meth:`truncate_history`)."""
        history = self.history
        counted, length, chars = self._counted
        if counted is not history or length > len(history):
            length = chars = 0
        if length < len(history):
            chars += sum(map(message_chars, history[length:]))
            self._counted = (history, len(history), chars)
        return max(1, chars // 4)

    @property
    def root(self) -> Session:
        """The top-level session: itself, unless it is a subagent's."""
        session = self
        while session.parent is not None:
            session = session.parent
        return session

    @property
    def roots(self) -> list[str]:
        return [self.cwd, *self.additional_directories]

    def new_tool_call_id(self) -> str:
        return f"call_{next(self._tool_ids)}"

    def new_message_id(self) -> str:
        return f"msg_{self.id[-8:]}_{next(self._message_ids)}"

    async def emit(self, update: t.SessionUpdate) -> None:
        """Record ``update`` and send it to the client."""
        log = self.log
        if log is not None:
            if isinstance(update, t.AgentMessageChunk | t.AgentThoughtChunk):
                log.chunk(update)  # the hot path: buffered, coalesced per message
            elif isinstance(update, t.UsageUpdate):
                self._record_usage(log)
            else:
                log.append(Update(update=update))
        await self.emit_fn(self.id, update)

    async def say(self, text: str) -> None:
        """An agent message of its own (a command's answer, a fallback for a notice)."""
        await self.emit(
            t.AgentMessageChunk(
                content=t.TextContent(text=text + "\n"), message_id=self.new_message_id()
            )
        )

    def usage_update(self, context_window: int) -> t.UsageUpdate:
        """The ``usage_update`` of the session's totals now."""
        amount = self.usage.cost
        return t.UsageUpdate(
            used=self.usage.context_tokens,
            size=context_window,
            cost=UNSET if amount is None else t.Cost(amount=round(amount, 6), currency="USD"),
        )

    async def replay(self, updates: list[t.SessionUpdate]) -> None:
        """Send updates that are already in the log (``session/load``): not recorded."""
        for update in updates:
            await self.emit_fn(self.id, update)

    def _record_usage(self, log: SessionLog) -> None:
        u = self.usage
        totals = (u.context_tokens, u.input_tokens, u.output_tokens, u.cost)
        if totals != self._saved_usage:
            self._saved_usage = totals
            log.append(
                UsageTotals(
                    context_tokens=u.context_tokens,
                    input_tokens=u.input_tokens,
                    output_tokens=u.output_tokens,
                    cost=u.cost,
                )
            )

    # ------------------------------------------------------------------ recorded changes

    def add_message(self, message: Message) -> None:
        """Append to the model's history."""
        self.history.append(message)
        if self.log is not None:
            self.log.append(AddMessage(message=message))

    def truncate_history(self, length: int) -> None:
        """Drop the history from ``length`` on (a refused prompt leaves the context)."""
        del self.history[length:]
        self.turnlog.rewritten(length)
        self._counted = (None, 0, 0)
        if self.log is not None:
            self.log.append(TruncateHistory(length=length))

    def stub_results(self, call_ids: list[str]) -> None:
        """Replace those tool results by stubs (see ``context``)."""
        self.history = apply_stubs(self.history, set(call_ids))
        if self.log is not None:
            self.log.append(PruneResults(call_ids=call_ids))

    def replace_history(self, messages: list[Message]) -> None:
        """Swap the whole history (a compaction's summary and what it keeps)."""
        self.history = list(messages)
        self.skills_told = self.skills_in_prompt  # notes on later changes may be gone
        self.turnlog.rewritten()
        if self.log is not None:
            self.log.append(ReplaceHistory(messages=self.history))

    def record_prompt(
        self, blocks: list[t.ContentBlock], text: str, message_id: str | None = None
    ) -> str:
        """A prompt starts its turn: keep it as the client sent it (for replay), under
        ``message_id`` when it has one already (a steer that started the turn); its
        message id (the turn's, for checkpoints) is returned."""
        if self.first_prompt is None:
            self.first_prompt = text
        message_id, at = message_id or self.new_message_id(), now_iso()
        self.turnlog.prompt(message_id, text, at, len(self.history))
        log = self.log
        if log is None:
            return message_id
        roots = (self.cwd, self.additional_directories)
        if roots != self.stored_roots:  # set by a load/resume: persisted once used
            self.stored_roots = (self.cwd, list(self.additional_directories))
            log.append(Roots(cwd=self.cwd, additional_directories=self.additional_directories))
            log.touch(cwd=self.cwd, additional_directories=list(self.additional_directories))
        log.append(Prompt(message_id=message_id, blocks=blocks, at=at, history=len(self.history)))
        return message_id

    async def record_touched(self, record: Touched) -> None:
        """What the turn is about to change: durable before it changes (so ``/undo``
        can put it back even if the agent is killed before the turn ends)."""
        self.turnlog.touch(record)
        if self.log is not None:
            self.log.append(record)
            await self.log.durable()

    def record_checkpoint(self, checkpoint: Checkpoint) -> None:
        """What the turn changed in the workspace (before its end is recorded)."""
        self.turnlog.checkpoint(checkpoint)
        if self.log is not None:
            self.log.append(checkpoint)

    def record_undone(self, turns: list[str], *, dropped: bool = False) -> None:
        """Checkpoints taken back (or dropped): recorded and made durable."""
        record = Undone(turns=turns, at=now_iso(), dropped=dropped)
        self.turnlog.took_back(record)
        if self.log is not None:
            self.log.append(record)
            self.log.sync()

    def record_rewind(self, record: Rewind) -> None:
        """A ``/rewind`` (after the history was cut, if it was)."""
        self.turnlog.rewound(record)
        if self.log is not None:
            self.log.append(record)

    async def record_turn_end(self, stop_reason: str) -> None:
        """The turn is over: mark it, update the index entry and make it all durable
        (before the prompt's response goes out)."""
        log = self.log
        if log is not None:
            at = now_iso()
            log.append(TurnEnd(stop_reason=stop_reason, at=at))
            log.touch(updated_at=at, turns=(log.meta.turns or 0) + 1)
            await log.durable()

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self._record_settings()

    def set_model(self, model: str) -> None:
        if model != self.model:
            self.system_text = None  # it names the model (and its edit tools): rebuilt
        self.model = model
        self._record_settings()

    def set_thinking(self, level: str) -> None:
        self.thinking = level
        self._record_settings()

    def set_sandbox(self, level: str) -> None:
        self.sandbox = level
        self._record_settings()

    def set_client_prompt(self, prompt: ClientPrompt | None) -> None:
        """The client's ``systemPrompt`` from a lifecycle request (kept in the log)."""
        self.client_prompt = prompt
        self.system_text = None  # rebuilt for the next request
        if prompt is not None and self.log is not None:
            self.log.append(Instructions(mode=prompt.mode, text=prompt.text))

    def settings_record(self) -> Settings:
        return Settings(
            mode=self.mode, model=self.model, thinking=self.thinking, sandbox=self.sandbox
        )

    def _record_settings(self) -> None:
        if self.log is not None:
            self.log.append(self.settings_record())
            self.log.sync()

    async def set_title(self, title: str) -> None:
        """Name the session: tell the client and keep it for ``session/list``."""
        at = now_iso()
        self.title = title
        if self.log is not None:
            self.log.touch(title=title, updated_at=at)
        await self.emit(t.SessionInfoUpdate(title=title, updated_at=at))
        if self.log is not None:
            self.log.sync()

    def flush(self) -> None:
        """Write buffered chunks (before the log is read or copied)."""
        if self.log is not None:
            self.log.flush()

    def close(self) -> None:
        """Flush, sync and release the log (and with it the ownership), soon: the disk
        writer does it (see :meth:`aclose`)."""
        log, self.log = self.log, None
        if log is not None:
            log.close()

    async def aclose(self) -> None:
        """:meth:`close`, returning once the log is released (another process may own
        the session as soon as this returns)."""
        log = self.log
        self.close()
        if log is not None:
            await asyncio.wrap_future(log.store.writer.barrier())

    def begin_turn(self, task: asyncio.Task[object] | None = None) -> Turn:
        """Register ``task`` (default: the current one) as a turn; call before the first
        ``await``."""
        task = task or asyncio.current_task()
        turn = Turn(task)
        self.turns.append(turn)
        if task is not None and task in self._cancelled_early:
            self._cancelled_early.discard(task)
            turn.cancel()  # ends at its first await, queued or not
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

    def cancel_task(self, task: asyncio.Task[object]) -> None:
        """Cancel the one turn running (or queued) in ``task``; a task that has not begun
        its turn yet begins it cancelled."""
        for turn in list(self.turns):
            if turn.task is task:
                turn.cancel()
                return
        self._cancelled_early.add(task)

    @property
    def busy(self) -> bool:
        return bool(self.turns)


def make_title(text: str, limit: int = 60) -> str:
    """A session title from a prompt: its first line, whitespace collapsed, at most
    ``limit`` characters (cut at a word when possible, with an ellipsis)."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    title = " ".join(line.split())
    if len(title) <= limit:
        return title
    cut = title[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" .,;:-") + "…"
