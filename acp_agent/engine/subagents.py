"""Subagents: the ``spawn_agent`` tool runs a child session to its answer.

A child is a :class:`~acp_agent.sessions.session.Session` of its own (history, tool-call and
message ids) whose ``parent`` is the spawning session. It runs one turn on the same
turn engine, model and mode as its parent, in a task of its own, and its final answer
becomes the tool's result. Any other end (a provider error, a limit, a refusal, a
cancel) is a failed tool call the parent model reads. Several ``spawn_agent`` calls in
one model response run side by side (``concurrent``, see ``toolcall.run_tools``).

How much the client sees depends on ``clientCapabilities.subagents``:

* **Exposed** (advertised). The child is announced on its parent's stream with a
  ``subagent_update`` (title, description, ``running``, ``cancel`` capability, cwd)
  before anything names it; its own updates, tool calls and permission requests then
  flow under its session id. The instruction and the answer are session-directed
  messages on both transcripts (outgoing on the sender's, incoming on the recipient's,
  cross-linked), each a ``session_message`` (participants and link) followed by its
  content as ``session_message_chunk``\\ s (see :mod:`.childstream`). Each view is
  reported when it is observed: the instruction when the child starts, the answer when
  the child's turn ends (its text streamed live on the child's own transcript
  meanwhile). State patches follow: ``requires_action`` while a permission request or a
  question (``ask_user``) waits, ``running`` again, and ``idle`` with the stop reason
  and usage at the end. The client may ``session/cancel`` a child (it and its
  descendants stop; the parent and siblings go on); any other call naming a child is
  refused with -32602 (a restricted session: ``sessions.registry.OpenSessions.guard``).
* **Unexposed**. Nothing names the child: its updates are dropped, and the requests its
  tools make (permission, question, ``fs/*``, ``terminal/*``) go out under the parent's
  session id, permission requests titled after the subagent, questions tied to the
  parent's ``spawn_agent`` call. Only the answer reaches the parent.

Children are never listed. An exposed child's stream is kept in its top-level session's
log, under the child's id (``ChildUpdate`` records, chunks coalesced per message), so
loading that session replays each child's transcript after its announcement, to a client
that takes subagents (``transcript.transcripts``); other clients see nothing of children.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from .. import log
from ..client import Client
from ..conversation import AssistantMessage, TextPart, UserMessage
from ..errors import ProviderAuthError, ProviderError, ToolError
from ..escaping import escaped
from ..protocol import UNSET, UnsetType
from ..protocol import types as t
from ..sessions.ids import new_session_id
from ..sessions.registry import OpenSessions
from ..sessions.session import Session
from ..tools.base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput
from .childstream import ChildLog, send_message
from .turn import run_turn
from .world import TurnContext

#: How deep subagents nest: a child may spawn, a grandchild may not.
MAX_DEPTH = 2

RUNNING = t.RunningStateUpdate()
REQUIRES_ACTION = t.RequiresActionStateUpdate()

_STOPPED = {
    "max_tokens": "its answer hit the token limit",
    "max_turn_requests": "it reached the limit of model requests for one turn",
    "refusal": "it refused the task",
    "cancelled": "it was cancelled before it finished",
}


@dataclass(eq=False)
class _Child:
    session: Session
    parent: Session
    title: str
    description: str
    exposed: bool
    announced: bool = False
    kept: ChildLog | None = None
    """Where an exposed child's stream is kept (its top-level session's log)."""

    async def patch(self, **changes: Any) -> None:
        """A ``subagent_update`` on the parent's stream carrying only what changed."""
        if self.exposed:
            self.announced = True
            await self.parent.emit(t.SubagentUpdate(session_id=self.session.id, **changes))


@dataclass(slots=True)
class _Outcome:
    stop_reason: str
    usage: t.Usage | None = None
    answer: str = ""
    error: str | None = None
    error_code: int = -32603


@dataclass
class Subagents:
    """The connection's subagents: spawning, ``session/cancel`` of a child, and the
    restricted-session rule for every other call that names one."""

    client: Client
    context_for: Callable[[Session, Client], Awaitable[TurnContext]]
    """Builds a turn's world for a session as seen through a client
    (``handlers.turns.Turns.context``)."""
    sessions: OpenSessions
    """The client's own sessions (where a spawning parent usually lives); children shown
    to the client join its ``restricted`` ids."""
    _live: dict[str, _Child] = field(default_factory=dict)

    @property
    def tool(self) -> SpawnAgent:
        """A ``spawn_agent`` tool bound to these subagents."""
        return SpawnAgent(self)

    def cancel(self, session_id: str) -> None:
        """``session/cancel`` naming a child: stop it (and its descendants) only; a
        child that is done, or was never shown to the client, is left alone."""
        child = self._live.get(session_id)
        if child is not None and child.exposed:
            child.session.cancel()

    # ------------------------------------------------------------------ spawning

    async def spawn(self, ctx: ToolContext, title: str, description: str, prompt: str) -> str:
        """Run a child of the session ``ctx`` belongs to; its answer, or ToolError."""
        parent = self.sessions.get(ctx.session_id)
        if parent is None:
            spawner = self._live.get(ctx.session_id)
            if spawner is None:
                raise ToolError("this session cannot spawn subagents")
            parent = spawner.session
        depth, ancestor = 1, parent  # the new child's
        while ancestor.parent is not None:
            depth, ancestor = depth + 1, ancestor.parent
        if depth > MAX_DEPTH:
            raise ToolError(f"subagents nest at most {MAX_DEPTH} levels deep")
        exposed = isinstance(self.client.capabilities.subagents, t.SubagentCapabilities)
        session = Session(
            id=new_session_id(),
            cwd=parent.cwd,
            emit_fn=_discard,
            mode=parent.mode,
            model=parent.model,
            thinking=parent.thinking,
            additional_directories=parent.additional_directories,
        )
        session.parent, session.mcp = parent, parent.mcp
        child = _Child(session, parent, escaped(title), description, exposed)  # shown: escaped
        if exposed:
            child.kept = ChildLog(session)
            session.emit_fn = child.kept.stream(self.client)
        view = _ChildClient(self.client, ctx.client, child, ctx.tool_call_id)
        turn_ctx = await self.context_for(session, view)
        self._live[session.id] = child
        if exposed:
            self.sessions.restricted.add(session.id)
        task = asyncio.create_task(self._run(child, turn_ctx, prompt))
        try:
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:  # the parent's turn ends: so does the child's
                session.cancel()
                if not session.turns:  # not started yet
                    task.cancel()
                await asyncio.wait({task})
                raise
        finally:
            del self._live[session.id]
        outcome = _Outcome("cancelled") if task.cancelled() else task.result()
        if outcome.stop_reason == "end_turn":
            return outcome.answer
        why = outcome.error or _STOPPED.get(outcome.stop_reason, outcome.stop_reason)
        partial = f"\nIts partial answer:\n{outcome.answer}" if outcome.answer else ""
        raise ToolError(f"The subagent {title!r} did not finish: {why}.{partial}")

    async def _run(self, child: _Child, ctx: TurnContext, prompt: str) -> _Outcome:
        """The child's turn, in its own task: a cancel here ends the child only."""
        session = child.session
        turn = session.begin_turn()
        try:
            try:
                await child.patch(
                    title=child.title,
                    description=child.description,
                    state=RUNNING,
                    capabilities=t.SubagentSessionCapabilities(
                        cancel=t.SessionCancelCapabilities()
                    ),
                    cwd=session.cwd,
                    additional_directories=session.additional_directories or UNSET,
                )
                if child.exposed:
                    await send_message(child.parent, session, prompt)
                with log.bound(session_id=session.id, parent_id=child.parent.id):
                    stop, usage = await run_turn(ctx, UserMessage([TextPart(prompt)]))
                outcome = _Outcome(stop, usage, _answer(session))
                if stop == "end_turn" and not outcome.answer:
                    outcome.answer = "(The subagent finished without an answer.)"
                if stop == "end_turn" and child.exposed:
                    await send_message(session, child.parent, outcome.answer)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                outcome = _Outcome("cancelled", answer=_answer(session))
            except ProviderError as exc:
                code = -32000 if isinstance(exc, ProviderAuthError) else -32603
                outcome = _Outcome(
                    "error", error=f"model request failed: {exc.message}", error_code=code
                )
            except Exception as exc:
                log.exception("subagent failed", session_id=session.id)
                outcome = _Outcome("error", error=f"internal error: {exc}")
            if child.kept is not None:
                child.kept.flush()
            if child.announced:
                await child.patch(state=_idle(session, outcome))
            return outcome
        finally:
            session.end_turn(turn)


class SpawnAgentArgs(Arguments):
    title: Annotated[str, Meta(min_length=1, description="A short title for the subagent.")]
    description: Annotated[
        str, Meta(min_length=1, description="One sentence: the subagent's role or purpose.")
    ]
    prompt: Annotated[str, Meta(min_length=1, description="The subagent's instructions.")]


class SpawnAgent(BuiltinTool[SpawnAgentArgs]):
    """The ``spawn_agent`` tool (no permission needed: the child's own calls ask)."""

    name = "spawn_agent"
    kind: ToolKind = "other"
    arguments = SpawnAgentArgs
    concurrent = True
    streamed = ("description", "prompt")
    description = (
        "Delegate a self-contained task to a subagent: a fresh agent with the same tools "
        "and none of this conversation. It works on its own and returns its final answer "
        "as this tool's result. Write a complete prompt (goal, context, what to report). "
        "Several spawn_agent calls in one response run in parallel."
    )

    def __init__(self, subagents: Subagents) -> None:
        self._subagents = subagents

    def describe(self, args: SpawnAgentArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo(f"Subagent: {args.title.strip()}")

    async def run(self, args: SpawnAgentArgs, ctx: ToolContext) -> ToolOutput:
        title, description, prompt = (
            _required(v, k) for k, v in
            (("title", args.title), ("description", args.description), ("prompt", args.prompt))
        )  # fmt: skip
        answer = await self._subagents.spawn(ctx, title, description, prompt)
        return ToolOutput(text=answer, raw_output={"answer": answer})


class _ChildClient:
    """The editor as a child's turn and tools see it.

    Exposed, a permission request or a question goes out under the child's id, with the
    child's state patched to ``requires_action`` meanwhile. Unexposed, requests go to the
    parent's own view (``upstream``) under the parent's id, permission requests titled
    after the child and their tool-call ids made unique in the parent's transcript,
    questions tied to the parent's ``spawn_agent`` call and prefixed with the child's
    title."""

    def __init__(self, root: Client, upstream: Client, child: _Child, call_id: str) -> None:
        self._root = root
        self._upstream = upstream
        self._child = child
        self._call_id = call_id  # the parent's spawn_agent call
        self._ids = itertools.count(1)

    @property
    def capabilities(self) -> t.ClientCapabilities:
        return self._root.capabilities

    def allows(self, method: str) -> bool:
        return self._root.allows(method)

    async def session_update(self, session_id: str, update: t.SessionUpdate) -> None:
        if self._child.exposed:
            await self._root.session_update(session_id, update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: t.ToolCallUpdate,
        options: Sequence[t.PermissionOption],
    ) -> t.RequestPermissionOutcome:
        child = self._child
        if not child.exposed:
            tool_call = msgspec.structs.replace(
                tool_call,
                tool_call_id=f"{self._call_id}/{tool_call.tool_call_id}",
                title=f"Subagent {child.title!r}: {tool_call.title or 'tool call'}",
            )
            return await self._upstream.request_permission(child.parent.id, tool_call, options)
        await child.patch(state=REQUIRES_ACTION)
        outcome = await self._root.request_permission(session_id, tool_call, options)
        if not isinstance(outcome, t.CancelledRequestPermissionOutcome):
            await child.patch(state=RUNNING)
        return outcome

    async def call(self, method: str, params: Any, result_type: type[Any]) -> Any:
        child = self._child
        if child.exposed and method == "elicitation/create":  # the user has to answer
            await child.patch(state=REQUIRES_ACTION)
            try:
                result = await self._root.call(method, params, result_type)
            except asyncio.CancelledError:
                raise  # the child's idle patch follows
            except BaseException:
                await child.patch(state=RUNNING)
                raise
            await child.patch(state=RUNNING)
            return result
        if child.exposed:
            return await self._root.call(method, params, result_type)
        if getattr(params, "session_id", None) == child.session.id:
            params = msgspec.structs.replace(params, session_id=child.parent.id)
            if isinstance(params, t.ElicitationFormMode | t.ElicitationUrlMode):
                params = msgspec.structs.replace(  # tied to the parent's spawn_agent call
                    params,
                    tool_call_id=self._call_id,
                    message=f"Subagent {child.title!r}: {params.message}",
                )
        return await self._upstream.call(method, params, result_type)


# ---------------------------------------------------------------------- helpers


async def _discard(session_id: str, update: t.SessionUpdate) -> None:
    """An unexposed child's stream: nothing leaves."""


def _idle(session: Session, outcome: _Outcome) -> t.IdleStateUpdate:
    usage: t.Usage | UnsetType | None = outcome.usage
    u = session.usage
    if usage is None and u.input_tokens + u.output_tokens:
        # the turn did not finish: the fresh session's totals are the turn's so far
        usage = t.Usage(
            total_tokens=u.input_tokens + u.output_tokens,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
        )
    error = (
        t.Error(code=outcome.error_code, message=outcome.error)
        if outcome.error is not None
        else UNSET
    )
    return t.IdleStateUpdate(
        stop_reason=outcome.stop_reason, usage=UNSET if usage is None else usage, error=error
    )


def _answer(session: Session) -> str:
    """The text of the child's last answer (its final model response)."""
    for message in reversed(session.history):
        if isinstance(message, AssistantMessage):
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
            if text:
                return text
        elif isinstance(message, UserMessage):
            break
    return ""


def _required(value: str, name: str) -> str:
    if not value.strip():
        raise ToolError(f"argument {name!r} must not be blank")
    return value.strip()
