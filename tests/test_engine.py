"""The turn engine in-process: a scripted provider, the recording fake editor, one
:class:`~acp_agent.turn.TurnContext`. Every stop reason, a cancel at each await point,
and every way a tool call can fail; after each, the next turn's request must be one the
real APIs accept (``tests.fakes.provider.check_history``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from acp_agent.conversation import (
    AssistantMessage,
    TextPart,
    ToolResultMessage,
    UserMessage,
)
from acp_agent.errors import ProviderError, ProviderHTTPError, ToolError
from acp_agent.permissions import Rules
from acp_agent.protocol import types as t
from acp_agent.providers.base import TextDelta, ToolCallReady
from acp_agent.providers.models import ModelInfo
from acp_agent.providers.resilient import Resilient, RetryPolicy
from acp_agent.session import Session
from acp_agent.tools import Arguments, BuiltinTool, CallInfo, ToolContext, ToolOutput, Toolset
from acp_agent.tools import builtin_tools
from acp_agent.turn import TurnContext, TurnLimits, run_turn

from .fakes.provider import Gate, ScriptedProvider, calls, text
from .tools.fake_client import FakeClient

INFO = ModelInfo(context_window=100_000, max_output_tokens=4096, input_price=1.0, output_price=2.0)


class Editor(FakeClient):
    """The fake editor, answering permission requests from a list (``allow_once`` when
    it runs out); a :class:`Gate` holds the answer until released (then allows)."""

    def __init__(self, answers: Sequence[str | Gate] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.answers = list(answers)
        self.asked: list[t.ToolCallUpdate] = []

    async def request_permission(
        self, session_id: str, tool_call: t.ToolCallUpdate, options: Sequence[t.PermissionOption]
    ) -> t.RequestPermissionOutcome:
        self.asked.append(tool_call)
        answer = self.answers.pop(0) if self.answers else "allow_once"
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

    def __init__(self, ws: Path, *responses: list[Any], answers: Sequence[str | Gate] = (),
                 mode: str = "ask", max_requests: int = 10) -> None:  # fmt: skip
        self.editor = Editor(answers)
        self.provider = ScriptedProvider(*responses)
        self.session = Session("sess_engine", str(ws), self.editor.session_update, mode=mode)
        self.wait = WaitTool()
        self.tools = Toolset([*builtin_tools().tools(), self.wait, BrokenTool()])
        self.retries: list[tuple[str, int, float]] = []
        self.hook: Gate | None = None
        self.max_requests = max_requests

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
            rules=Rules(),
            system="You are a test.",
            limits=TurnLimits(max_turn_requests=self.max_requests),
            before_request=before_request,
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


class TestStopReasons:
    async def test_end_turn_streams_one_message_and_reports_usage(self, tmp_path: Path) -> None:
        world = World(tmp_path, text("Hel", "lo"))
        stop, usage = await world.turn()
        assert stop == "end_turn"
        chunks = world.emitted(t.AgentMessageChunk)
        assert [c.content.text for c in chunks] == ["Hel", "lo"]
        assert len({c.message_id for c in chunks}) == 1
        assert world.session.history[-1] == AssistantMessage([TextPart("Hello")])
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (10, 2, 12)
        (update,) = world.emitted(t.UsageUpdate)
        assert update.used == 12 and update.size == INFO.context_window
        assert world.provider.requests[0].system == "You are a test."

    async def test_tool_calls_loop_until_the_model_answers(self, tmp_path: Path) -> None:
        (tmp_path / "a.txt").write_text("alpha\n")
        world = World(tmp_path, calls(("read_file", {"path": "a.txt"})), text("done"))
        stop, usage = await world.turn()
        assert stop == "end_turn" and usage.total_tokens == 25 + 11
        (result,) = world.results()
        assert "alpha" in result.parts[0].text and not result.is_error  # type: ignore[union-attr]
        assert list(world.final_status().values()) == ["completed"]
        assert len(world.provider.requests) == 2

    async def test_max_tokens_answers_the_dangling_calls(self, tmp_path: Path) -> None:
        response = calls(("read_file", {"path": "a.txt"}))
        response[-1] = response[-1].__class__("length")  # Finished("length")
        world = World(tmp_path, response)
        assert (await world.turn())[0] == "max_tokens"
        (result,) = world.results()
        assert result.is_error and "token limit" in result.parts[0].text  # type: ignore[union-attr]
        await world.next_turn_is_accepted()

    async def test_refusal_takes_the_prompt_out_of_the_context(self, tmp_path: Path) -> None:
        world = World(tmp_path, text("ok"), text("I can't", reason="refusal"))
        await world.turn("first")
        before = list(world.session.history)
        assert (await world.turn("bad"))[0] == "refusal"
        assert world.session.history == before

    async def test_max_turn_requests(self, tmp_path: Path) -> None:
        plan = {"entries": [{"content": "x", "priority": "low", "status": "pending"}]}
        world = World(tmp_path, *[calls(("update_plan", plan))] * 3, max_requests=2)
        assert (await world.turn())[0] == "max_turn_requests"
        assert len(world.provider.requests) == 2
        await world.next_turn_is_accepted()


class TestToolFailures:
    """Failures are results the model reads; the turn goes on."""

    async def _result_of(self, tmp_path: Path, call: ToolCallReady | tuple[str, dict[str, Any]],
                         **kw: Any) -> tuple[World, str]:  # fmt: skip
        world = World(tmp_path, calls(call), text("noted"), **kw)
        assert (await world.turn())[0] == "end_turn"
        (result,) = world.results()
        assert result.is_error
        assert list(world.final_status().values()) == ["failed"]
        return world, result.parts[0].text  # type: ignore[union-attr]

    async def test_unknown_tool_lists_the_tools(self, tmp_path: Path) -> None:
        _, message = await self._result_of(tmp_path, ("no_such_tool", {}))
        assert "Unknown tool 'no_such_tool'" in message and "read_file" in message

    async def test_invalid_json_is_reported_as_such(self, tmp_path: Path) -> None:
        bad = ToolCallReady("c1", "read_file", {}, "tool arguments are not valid JSON (x): {pa")
        _, message = await self._result_of(tmp_path, bad)
        assert "not valid JSON" in message and "missing" not in message

    async def test_wrong_argument_types_name_the_field(self, tmp_path: Path) -> None:
        _, message = await self._result_of(tmp_path, ("read_file", {"path": "a", "offset": "x"}))
        assert "$.offset" in message and "read_file takes: path, offset?, limit?" in message

    async def test_describe_failure(self, tmp_path: Path) -> None:
        _, message = await self._result_of(tmp_path, ("broken", {"key": "describe"}))
        assert "cannot describe that" in message

    async def test_tool_error_while_running(self, tmp_path: Path) -> None:
        _, message = await self._result_of(tmp_path, ("read_file", {"path": "missing.txt"}))
        assert "not found" in message

    async def test_unexpected_exception_is_an_internal_error_of_the_tool(
        self, tmp_path: Path
    ) -> None:
        _, message = await self._result_of(tmp_path, ("broken", {}), mode="bypass")
        assert message == "Internal error in broken: boom"

    async def test_rejected_by_the_user(self, tmp_path: Path) -> None:
        world, message = await self._result_of(
            tmp_path, ("write_file", {"path": "x.txt", "content": "x"}), answers=["reject_once"]
        )
        assert "rejected" in message and not (tmp_path / "x.txt").exists()
        assert len(world.editor.asked) == 1

    async def test_plan_mode_refuses_writes_without_asking(self, tmp_path: Path) -> None:
        world, message = await self._result_of(
            tmp_path, ("write_file", {"path": "x.txt", "content": "x"}), mode="plan"
        )
        assert "plan mode" in message and world.editor.asked == []


class TestCancel:
    """A cancel at any await point propagates, closes the stream, and leaves a history
    the next request can use."""

    async def test_before_the_first_event(self, tmp_path: Path) -> None:
        gate = Gate()
        world = World(tmp_path, [gate, *text("late")])
        await cancelled(await run_until(world, gate))
        assert world.session.history == [UserMessage([TextPart("go")])]
        assert world.provider.closed == world.provider.opened == 1
        await world.next_turn_is_accepted()

    async def test_mid_stream_keeps_the_partial_answer(self, tmp_path: Path) -> None:
        gate = Gate()
        world = World(tmp_path, [TextDelta("partial "), gate, *text("rest")])
        await cancelled(await run_until(world, gate))
        assert world.session.history[-1] == AssistantMessage([TextPart("partial ")])
        assert world.provider.closed == 1
        await world.next_turn_is_accepted()

    async def test_in_the_hook_before_a_request(self, tmp_path: Path) -> None:
        world = World(tmp_path, text("never"))
        world.hook = Gate()
        await cancelled(await run_until(world, world.hook))
        assert world.provider.requests == []
        world.hook = None
        await world.next_turn_is_accepted()

    async def test_while_the_user_is_asked(self, tmp_path: Path) -> None:
        gate = Gate()
        world = World(tmp_path, calls(("write_file", {"path": "x.txt", "content": "x"})),
                      answers=[gate])  # fmt: skip
        await cancelled(await run_until(world, gate))
        (result,) = world.results()
        assert result.is_error and not (tmp_path / "x.txt").exists()
        await world.next_turn_is_accepted()

    async def test_while_a_tool_runs(self, tmp_path: Path) -> None:
        world = World(tmp_path, calls(("wait", {"key": "a"}), ("read_file", {"path": "x"})))
        gate = world.wait.gates["a"] = Gate()
        await cancelled(await run_until(world, gate))
        assert [r.is_error for r in world.results()] == [True, True]  # the unrun one too
        assert list(world.final_status().values()) == ["failed"]
        await world.next_turn_is_accepted()

    async def test_while_concurrent_tools_run(self, tmp_path: Path) -> None:
        world = World(tmp_path, calls(("wait", {"key": "a"}), ("wait", {"key": "b"})))
        gate_a = world.wait.gates["a"] = Gate()
        gate_b = world.wait.gates["b"] = Gate()
        gate_b.release.set()  # b finishes, a hangs
        await cancelled(await run_until(world, gate_a))
        assert sorted(world.final_status().values()) == ["completed", "failed"]
        assert len(world.results()) == 2
        await world.next_turn_is_accepted()

    async def test_a_cancelled_permission_request_cancels_the_turn(self, tmp_path: Path) -> None:
        world = World(tmp_path, calls(("write_file", {"path": "x.txt", "content": "x"})),
                      answers=["cancelled"])  # fmt: skip
        with pytest.raises(asyncio.CancelledError):
            await world.turn()
        await world.next_turn_is_accepted()


class TestProviderFailures:
    async def test_a_retryable_error_before_output_is_retried(self, tmp_path: Path) -> None:
        busy = ProviderHTTPError("busy", 529, retry_after=0)
        world = World(tmp_path, [busy], text("ok"))
        assert (await world.turn())[0] == "end_turn"
        assert world.retries == [("busy", 1, 0)]
        assert len(world.provider.requests) == 2

    async def test_a_client_error_ends_the_turn_with_the_history_intact(
        self, tmp_path: Path
    ) -> None:
        world = World(tmp_path, [ProviderHTTPError("bad request", 400)])
        with pytest.raises(ProviderHTTPError):
            await world.turn()
        assert world.retries == []
        await world.next_turn_is_accepted()

    async def test_a_failure_after_output_is_not_retried(self, tmp_path: Path) -> None:
        cut = ProviderHTTPError("cut", 500)
        world = World(tmp_path, [TextDelta("half "), cut], text("again"))
        with pytest.raises(ProviderHTTPError):
            await world.turn()
        assert world.retries == [] and len(world.provider.requests) == 1
        assert world.session.history[-1] == AssistantMessage([TextPart("half ")])
        await world.next_turn_is_accepted()
