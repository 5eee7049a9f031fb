"""An in-process turn world: one session, the fake editor (with scripted permission
answers), a scripted provider behind the real resilient wrapper, and the turn context."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from acp_agent.conversation import TextPart, ToolResultMessage, UserMessage
from acp_agent.engine.permissions import Rules
from acp_agent.engine.turn import TurnContext, TurnLimits, run_turn
from acp_agent.errors import ProviderError, ToolError
from acp_agent.protocol import types as t
from acp_agent.providers.models import ModelInfo
from acp_agent.providers.resilient import Resilient, RetryPolicy
from acp_agent.sessions.session import Session
from acp_agent.tools import (
    Arguments,
    BuiltinTool,
    CallInfo,
    ToolContext,
    ToolOutput,
    Toolset,
    builtin_tools,
)

from .fakes.provider import Gate, ScriptedProvider, text
from .tools.fake_client import FakeClient

INFO = ModelInfo(context_window=100_000, max_output_tokens=4096, input_price=1.0, output_price=2.0)


class Editor(FakeClient):
    """The fake editor, answering permission requests from a list (``allow_once`` when
    it runs out); a :class:`Gate` holds the answer until released (then allows)."""

    def __init__(self, answers: Sequence[str | Gate | BaseException] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.answers = list(answers)
        self.asked: list[t.ToolCallUpdate] = []
        self.offered: list[list[t.PermissionOption]] = []

    async def request_permission(
        self, session_id: str, tool_call: t.ToolCallUpdate, options: Sequence[t.PermissionOption]
    ) -> t.RequestPermissionOutcome:
        self.asked.append(tool_call)
        self.offered.append(list(options))
        answer = self.answers.pop(0) if self.answers else "allow_once"
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Gate):
            answer.reached.set()
            await answer.release.wait()
            answer = "allow_once"
        if answer == "cancelled":
            return t.CancelledRequestPermissionOutcome()
        return t.SelectedPermissionOutcome(option_id=answer)


class WaitArgs(Arguments):
    key: str = ""


class WaitTool(BuiltinTool[WaitArgs]):
    """A read-only tool that stops at a gate (``concurrent`` like subagents)."""

    name = "wait"
    kind = "read"
    arguments = WaitArgs
    description = "Wait."
    concurrent = True

    def __init__(self) -> None:
        self.gates: dict[str, Gate] = {}

    def describe(self, args: WaitArgs, ctx: ToolContext) -> CallInfo:
        return CallInfo(f"Wait {args.key}")

    async def run(self, args: WaitArgs, ctx: ToolContext) -> ToolOutput:
        gate = self.gates.setdefault(args.key, Gate())
        gate.reached.set()
        await gate.release.wait()
        return ToolOutput(f"waited {args.key}")


class BrokenTool(BuiltinTool[WaitArgs]):
    name = "broken"
    kind = "other"
    arguments = WaitArgs
    description = "Fails."

    def describe(self, args: WaitArgs, ctx: ToolContext) -> CallInfo:
        if args.key == "describe":
            raise ToolError("cannot describe that")
        return CallInfo("Broken")

    async def run(self, args: WaitArgs, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("boom")


class World:
    """One session, its editor and provider, and the context builder."""

    def __init__(
        self,
        ws: Path,
        *responses: list[Any],
        answers: Sequence[str | Gate | BaseException] = (),
        mode: str = "ask",
        max_requests: int = 10,
    ) -> None:
        self.editor = Editor(answers)
        self.provider = ScriptedProvider(*responses)
        self.session = Session("sess_engine", str(ws), self.editor.session_update, mode=mode)
        self.wait = WaitTool()
        self.tools = Toolset([*builtin_tools().tools(), self.wait, BrokenTool()])
        self.retries: list[tuple[str, int, float]] = []
        self.hook: Gate | None = None
        self.max_requests = max_requests
        self.rules = Rules()
        self.env: dict[str, str] | None = None

    def context(self) -> TurnContext:
        async def on_retry(exc: ProviderError, attempt: int, delay: float) -> None:
            self.retries.append((exc.message, attempt, delay))

        async def before_request() -> None:
            if self.hook is not None:
                self.hook.reached.set()
                await self.hook.release.wait()

        return TurnContext(
            session=self.session,
            client=self.editor,
            provider=Resilient(self.provider, RetryPolicy(max_retries=2, max_delay=0), on_retry),
            model=INFO,
            tools=self.tools,
            rules=self.rules,
            system="You are a test.",
            limits=TurnLimits(max_turn_requests=self.max_requests),
            before_request=before_request,
            env=self.env,
        )

    async def turn(self, prompt: str = "go") -> tuple[str, t.Usage]:
        return await run_turn(self.context(), UserMessage([TextPart(prompt)]))

    def emitted(self, kind: type[Any]) -> list[Any]:
        return [u for u in self.editor.emitted if isinstance(u, kind)]

    def results(self) -> list[ToolResultMessage]:
        return [m for m in self.session.history if isinstance(m, ToolResultMessage)]

    def final_status(self) -> dict[str, str]:
        """Each tool call's last status as the editor saw it."""
        status: dict[str, str] = {}
        for u in self.editor.emitted:
            if isinstance(u, t.ToolCall | t.ToolCallUpdateSessionUpdate) and isinstance(
                u.status, str
            ):
                status[u.tool_call_id] = u.status
        return status

    async def next_turn_is_accepted(self) -> None:
        """The history after whatever happened is one the APIs take."""
        self.provider.responses.insert(0, text("fine"))
        assert (await self.turn("and now?"))[0] == "end_turn"


async def run_until(world: World, gate: Gate) -> asyncio.Task[tuple[str, t.Usage]]:
    task = asyncio.create_task(world.turn())
    reached = asyncio.create_task(gate.reached.wait())
    done, _ = await asyncio.wait({task, reached}, return_when=asyncio.FIRST_COMPLETED)
    assert reached in done, f"the turn ended before the gate: {task.result()}"
    return task


async def cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
