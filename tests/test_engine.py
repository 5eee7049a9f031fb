"""The turn engine in-process: a scripted provider, the recording fake editor, one
:class:`~acp_agent.engine.turn.TurnContext`. Every stop reason, a cancel at each await point,
and every way a tool call can fail; after each, the next turn's request must be one the
real APIs accept (``tests.fakes.provider.check_history``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from acp_agent.conversation import AssistantMessage, TextPart, UserMessage
from acp_agent.errors import ProviderHTTPError
from acp_agent.protocol import types as t
from acp_agent.providers.base import Finished, TextDelta, ToolCallReady

from .engine_world import INFO, World, cancelled, run_until
from .fakes.provider import Gate, calls, text


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
        response[-1] = Finished("length")
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
        write = ("write_file", {"path": "x", "content": "x"})  # after the wait, in order
        world = World(tmp_path, calls(("wait", {"key": "a"}), write))
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


class TestRequests:
    async def test_thinking_only_for_models_that_think(self, tmp_path: Path) -> None:
        import msgspec

        world = World(tmp_path, text("a"), text("b"))
        world.session.thinking = "high"
        await world.turn()
        assert world.provider.requests[-1].thinking == "off"  # INFO: no thinking
        ctx = world.context()
        ctx.model = msgspec.structs.replace(INFO, supports_thinking=True)
        from acp_agent.conversation import TextPart, UserMessage
        from acp_agent.engine.turn import run_turn

        await run_turn(ctx, UserMessage([TextPart("again")]))
        again: str = world.provider.requests[-1].thinking
        assert again == "high"
        assert world.provider.requests[-1].max_tokens == INFO.max_output_tokens


class TestLiveToolCalls:
    async def test_a_call_is_shown_as_soon_as_the_model_starts_it(self, tmp_path: Path) -> None:
        from acp_agent.providers.base import ToolCallStarted

        (tmp_path / "a.txt").write_text("alpha\n")
        gate = Gate()
        started = [ToolCallStarted("m1", "read_file"), gate,
                   *calls(ToolCallReady("m1", "read_file", {"path": "a.txt"}))]  # fmt: skip
        world = World(tmp_path, started, text("ok"))
        task = await run_until(world, gate)
        (shown,) = world.emitted(t.ToolCall)  # before the arguments are complete
        assert shown.status == "pending" and shown.title == "read_file" and shown.kind == "read"
        gate.release.set()
        assert (await task)[0] == "end_turn"
        assert len(world.emitted(t.ToolCall)) == 1  # the same entry, completed by updates
        assert world.final_status() == {shown.tool_call_id: "completed"}

    async def test_a_started_call_the_answer_never_finished_ends_failed(
        self, tmp_path: Path
    ) -> None:
        from acp_agent.providers.base import ToolCallStarted

        broken = [ToolCallStarted("m1", "write_file"), ProviderHTTPError("cut", 500)]
        world = World(tmp_path, broken)
        with pytest.raises(ProviderHTTPError):
            await world.turn()
        assert list(world.final_status().values()) == ["failed"]
        await world.next_turn_is_accepted()

    async def test_reads_run_side_by_side_and_writes_in_order(self, tmp_path: Path) -> None:
        write = ("write_file", {"path": "w.txt", "content": "x"})
        world = World(tmp_path, calls(("wait", {"key": "a"}), ("wait", {"key": "b"}), write,
                                      ("wait", {"key": "c"})), text("ok"), mode="bypass")
        gates = {k: world.wait.gates.setdefault(k, Gate()) for k in "abc"}
        task = asyncio.create_task(world.turn())
        await gates["a"].reached.wait()
        await gates["b"].reached.wait()  # a and b at once
        assert not (tmp_path / "w.txt").exists() and not gates["c"].reached.is_set()
        gates["a"].release.set()
        gates["b"].release.set()
        await gates["c"].reached.wait()  # after the write, which came after a and b
        assert (tmp_path / "w.txt").exists()
        gates["c"].release.set()
        assert (await task)[0] == "end_turn"
        from acp_agent.conversation import ToolCallPart

        asked = [p.call_id for m in world.session.history if isinstance(m, AssistantMessage)
                 for p in m.parts if isinstance(p, ToolCallPart)]  # fmt: skip
        assert [r.call_id for r in world.results()] == asked  # results in call order
