"""The prompt turn end to end over stdio, on the scripted offline model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from .harness import AgentProcess, Scripted, allow_first_option, select_kind
from .limits import eventually
from .procs import group_gone

Script = list[list[dict[str, Any]]]
Start = Callable[..., Awaitable[str]]  # the `session` fixture: initialize, session/new


@pytest.fixture
async def session(workspace: str) -> AsyncIterator[Callable[[AgentProcess], Any]]:
    async def start(agent: AgentProcess, **caps: Any) -> str:
        await agent.initialize(caps or None)
        return await agent.new_session(workspace)

    yield start


def kinds(agent: AgentProcess, sid: str) -> list[str]:
    return [u["sessionUpdate"] for u in agent.updates_of(sid)]


def text_of(agent: AgentProcess, sid: str, kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, kind))


class TestStreaming:
    async def test_text_and_thoughts_stream_with_stable_message_ids(
        self, scripted: Scripted, session: Start
    ) -> None:
        """Chunks of one message share a messageId; thoughts and text have different ids."""
        agent = scripted(
            [
                [{"thinking": "let me think about it"}, {"text": "one two three four five"}],
                [{"text": "second answer"}],
            ]
        )
        async with agent:
            sid = await session(agent)
            result = await agent.prompt(sid, "hi")
            assert result["stopReason"] == "end_turn"
            assert text_of(agent, sid) == "one two three four five"
            assert text_of(agent, sid, "agent_thought_chunk") == "let me think about it"
            msg_ids = {u["messageId"] for u in agent.updates_of(sid, "agent_message_chunk")}
            thought_ids = {u["messageId"] for u in agent.updates_of(sid, "agent_thought_chunk")}
            assert len(msg_ids) == 1 and len(thought_ids) == 1 and msg_ids != thought_ids
            assert len(agent.updates_of(sid, "agent_message_chunk")) > 1
            # usage reported for the model response, and in the prompt result
            assert agent.updates_of(sid, "usage_update")[-1]["size"] > 0
            assert result["usage"]["totalTokens"] > 0
            await agent.prompt(sid, "again")
            new_ids = {
                u["messageId"] for u in agent.updates_of(sid, "agent_message_chunk")
            } - msg_ids
            assert len(new_ids) == 1  # a new message, a new id

    async def test_no_update_after_the_response(self, scripted: Scripted, session: Start) -> None:
        """Every update of a turn precedes its session/prompt response."""
        agent = scripted([[{"text": "a b c d e f g h"}]])
        async with agent:
            sid = await session(agent)
            task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "go"}]})
            response = await task
            assert await agent.close() == 0  # everything the agent ever wrote has been read
            index = agent.messages.index(response)
            assert not [m for m in agent.messages[index + 1:] if m.get("method") == "session/update"
                        and m["params"]["update"]["sessionUpdate"] != "usage_update"]


class TestStopReasons:
    async def test_max_tokens(self, scripted: Scripted, session: Start) -> None:
        agent = scripted([[{"text": "cut sho"}, {"finish": "length"}]])
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "max_tokens"

    async def test_refusal(self, scripted: Scripted, session: Start) -> None:
        agent = scripted(
            [[{"text": "I can't help with that."}, {"finish": "refusal"}], [{"text": "ok"}]]
        )
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "refusal"
            assert (await agent.prompt(sid, "y"))["stopReason"] == "end_turn"

    async def test_max_turn_requests(self, scripted: Scripted, session: Start) -> None:
        """A model that keeps calling tools is stopped by the per-turn request cap."""
        call = {"tool_call": {"name": "no_such_tool", "arguments": {}}}
        agent = scripted([[call]] * 5, config="[limits]\nmax-turn-requests = 3\n")
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "max_turn_requests"
            assert len(agent.updates_of(sid, "tool_call")) == 3

    async def test_unknown_tool_is_a_failed_call_and_the_loop_continues(
        self, scripted: Scripted, session: Start
    ) -> None:
        agent = scripted([[{"tool_call": {"name": "no_such_tool", "arguments": {"a": 1}}}],
                          [{"text": "done"}]])
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "end_turn"
            (call,) = agent.tool_calls(sid)
            assert call["status"] == "failed" and call["rawInput"] == {"a": 1}
            assert text_of(agent, sid) == "done"


class TestCancel:
    async def _cancel_when(self, agent: AgentProcess, sid: str,
                           ready: Callable[[], bool]) -> dict[str, Any]:
        task = agent.start_request("session/prompt", {"sessionId": sid,
                                                      "prompt": [{"type": "text", "text": "go"}]})
        await eventually(ready, "the moment to cancel")
        await agent.notify("session/cancel", {"sessionId": sid})
        response = await task
        assert "result" in response, response
        result: dict[str, Any] = response["result"]
        return result

    async def test_cancel_before_the_model_answers(
        self, scripted: Scripted, session: Start, tmp_path: Path
    ) -> None:
        asked = tmp_path / "asked"
        agent = scripted([[{"mark": str(asked)}, {"hang": True}, {"text": "late"}],
                          [{"text": "next"}]])
        async with agent:
            sid = await session(agent)
            result = await self._cancel_when(agent, sid, asked.exists)
            assert result["stopReason"] == "cancelled"
            assert text_of(agent, sid) == ""
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"

    async def test_cancel_while_streaming(self, scripted: Scripted, session: Start) -> None:
        agent = scripted([[{"text": "first words "}, {"hang": True}], [{"text": "next"}]])
        async with agent:
            sid = await session(agent)
            result = await self._cancel_when(
                agent, sid, lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
            assert result["stopReason"] == "cancelled"
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"

    async def test_cancel_during_permission_request(
        self, scripted: Scripted, session: Start
    ) -> None:
        """The agent stops waiting on a permission request the client never answers."""
        agent = scripted(
            [
                [{"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}],
                [{"text": "next"}],
            ]
        )
        never = asyncio.Event()

        async def no_answer(params: dict[str, Any]) -> None:
            await never.wait()

        agent.handlers["session/request_permission"] = no_answer
        async with agent:
            sid = await session(agent)
            result = await self._cancel_when(agent, sid, lambda: bool(agent.client_requests))
            assert result["stopReason"] == "cancelled"
            # the tool call was announced before the permission request
            first_call = next(i for i, m in enumerate(agent.messages)
                              if m.get("method") == "session/update"
                              and m["params"]["update"]["sessionUpdate"] == "tool_call")
            first_perm = next(i for i, m in enumerate(agent.messages)
                              if m.get("method") == "session/request_permission")
            assert first_call < first_perm
            # the call's final state reached the client before the prompt's answer, as a
            # reloaded session would show it
            answer = next(i for i, m in enumerate(agent.messages) if m.get("result") == result)
            final = [m["params"]["update"] for m in agent.messages[:answer]
                     if m.get("method") == "session/update"
                     and m["params"]["update"]["sessionUpdate"] == "tool_call_update"][-1]
            assert final["status"] == "failed"
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"
            # no $/cancel_request for the question: after session/cancel the client answers
            # it `cancelled` itself (the spec), and the official clients log an error for it
            assert not any(m.get("method") == "$/cancel_request" for m in agent.messages)

    async def test_cancelled_permission_outcome_cancels_the_turn(
        self, scripted: Scripted, session: Start
    ) -> None:
        agent = scripted(
            [[{"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}]]
        )
        agent.handlers["session/request_permission"] = lambda p: {
            "outcome": {"outcome": "cancelled"}
        }
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "cancelled"

    async def test_rejection_is_reported_to_the_model(
        self, scripted: Scripted, session: Start
    ) -> None:
        agent = scripted(
            [
                [{"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}],
                [{"text": "understood"}],
            ]
        )
        agent.handlers["session/request_permission"] = select_kind("reject_once")
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "end_turn"
            statuses = [u.get("status") for u in agent.updates_of(sid, "tool_call_update")]
            assert statuses[-1] == "failed"

    async def test_cancel_racing_the_natural_end(self, scripted: Scripted, session: Start) -> None:
        """A cancel that arrives as the turn ends gives one response, either reason."""
        agent = scripted([[{"text": "quick"}]] * 20)
        async with agent:
            sid = await session(agent)
            for i in range(12):
                before = len(agent.messages)
                task = agent.start_request(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
                    id=f"race-{i}",
                )
                def ready(i: int = i, before: int = before) -> bool:
                    """At once, or after the turn's first, second, third message."""
                    return (len(agent.messages) - before >= i % 4
                            or any(m.get("id") == f"race-{i}" for m in agent.messages))

                await agent.wait_for(ready)
                await agent.notify("session/cancel", {"sessionId": sid})
                response = await task
                assert response["result"]["stopReason"] in ("end_turn", "cancelled")
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"

    async def test_cancel_request_on_the_prompt(self, scripted: Scripted, session: Start) -> None:
        """$/cancel_request naming the prompt's id ends the turn as `cancelled`."""
        agent = scripted([[{"text": "start "}, {"hang": True}]])
        async with agent:
            sid = await session(agent)
            task = agent.start_request(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
                id="p-1",
            )
            await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
            await agent.notify("$/cancel_request", {"requestId": "p-1"})
            assert (await task)["result"]["stopReason"] == "cancelled"

    async def test_cancel_request_cancels_only_the_prompt_it_names(
        self, scripted: Scripted, session: Start
    ) -> None:
        """$/cancel_request naming a queued prompt ends that one only (it was every turn
        of the session); session/cancel still ends them all."""
        agent = scripted([[{"text": "start "}, {"hang": True}], [{"text": "never"}]])
        async with agent:
            sid = await session(agent)

            async def prompt(request_id: str) -> asyncio.Future[dict[str, Any]]:
                params = {"sessionId": sid, "prompt": [{"type": "text", "text": request_id}]}
                return await agent.sent_request("session/prompt", params, id=request_id)

            running = await prompt("p-1")
            await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
            queued = await prompt("p-2")
            await agent.notify("$/cancel_request", {"requestId": "p-2"})
            assert (await queued)["result"]["stopReason"] == "cancelled"
            await agent.request("session/list", {})  # a round trip: all earlier output is in
            assert not running.done()
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await running)["result"]["stopReason"] == "cancelled"
            assert text_of(agent, sid) == "start "

    async def test_queued_prompts_run_in_order_and_cancel_together(
        self, scripted: Scripted, session: Start
    ) -> None:
        """A second prompt on a busy session waits; session/cancel ends both."""
        agent = scripted([[{"text": "one"}, {"tool_call": {"name": "run_command",
                                                            "arguments": {"command": "true"}}}],
                          [{"finish": "stop"}], [{"text": "two"}],
                          [{"text": "three"}, {"hang": True}], [{"text": "x"}]])
        gate = asyncio.Event()

        async def when_the_gate_opens(params: dict[str, Any]) -> dict[str, Any]:
            await gate.wait()
            return allow_first_option(params)

        agent.handlers["session/request_permission"] = when_the_gate_opens

        def prompt(text: str) -> asyncio.Task[dict[str, Any]]:
            return agent.start_request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": text}]})

        async def delivered() -> None:
            """Everything sent so far has been read and dispatched by the agent."""
            await agent.request("initialize", {"protocolVersion": 1})

        async with agent:
            sid = await session(agent)
            first = prompt("1")
            await agent.wait_for(lambda: bool(agent.client_requests))  # 1 is held at the gate
            second = prompt("2")
            await delivered()
            assert text_of(agent, sid) == "one" and not second.done()  # 2 waits for 1
            gate.set()
            r1, r2 = await first, await second
            assert r1["result"]["stopReason"] == r2["result"]["stopReason"] == "end_turn"
            assert text_of(agent, sid) == "onetwo"
            third = prompt("3")
            await agent.wait_for(lambda: text_of(agent, sid) == "onetwothree")
            fourth = prompt("4")
            await delivered()
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await third)["result"]["stopReason"] == "cancelled"
            assert (await fourth)["result"]["stopReason"] == "cancelled"

    async def test_sessions_run_in_parallel(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        """A turn that never ends on one session does not hold up another session."""
        agent = scripted([[{"text": "started "}, {"hang": True}], [{"text": "b"}]])
        async with agent:
            s1 = await session(agent)
            s2 = await agent.new_session(workspace)
            first = agent.start_request("session/prompt", {"sessionId": s1, "prompt": [
                {"type": "text", "text": "x"}]})
            await agent.wait_for(lambda: bool(agent.updates_of(s1, "agent_message_chunk")))
            assert (await agent.prompt(s2, "y"))["stopReason"] == "end_turn"
            assert not first.done()
            await agent.notify("session/cancel", {"sessionId": s1})
            assert (await first)["result"]["stopReason"] == "cancelled"

    async def test_close_cancels_the_running_turn(self, scripted: Scripted, session: Start) -> None:
        agent = scripted([[{"text": "start "}, {"hang": True}]])
        async with agent:
            sid = await session(agent)
            task = agent.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
            assert await agent.request("session/close", {"sessionId": sid}) == {}
            assert (await task)["result"]["stopReason"] == "cancelled"
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": []})
            assert response["error"]["code"] == -32002


class TestProviderFailures:
    async def test_rate_limit_is_retried(self, scripted: Scripted, session: Start) -> None:
        agent = scripted([[{"error": {"status": 429, "retry_after": 0.05}}],
                          [{"error": {"status": 503, "retry_after": 0.05}}],
                          [{"text": "finally"}]])
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "end_turn"
            assert text_of(agent, sid) == "finally"

    async def test_persistent_failure_is_a_clear_error(
        self, scripted: Scripted, session: Start
    ) -> None:
        agent = scripted(
            [[{"error": {"status": 500, "retry_after": 0.01, "message": "upstream down"}}]] * 3
            + [[{"text": "recovered"}]],
            config="[limits]\nmax-retries = 2\n",
        )
        async with agent:
            sid = await session(agent)
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "x"}]})
            assert response["error"]["code"] == -32603
            assert "upstream down" in response["error"]["message"]
            assert (await agent.prompt(sid, "y"))["stopReason"] == "end_turn"

    async def test_auth_failure_is_auth_required(self, scripted: Scripted, session: Start) -> None:
        agent = scripted([[{"error": {"status": 401, "message": "bad key"}}]])
        async with agent:
            sid = await session(agent)
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "x"}]})
            assert response["error"]["code"] == -32000

    async def test_broken_stream_keeps_partial_text_and_errors(
        self, scripted: Scripted, session: Start
    ) -> None:
        agent = scripted([[{"text": "partial answer"}, {"disconnect": True}], [{"text": "ok"}]])
        async with agent:
            sid = await session(agent)
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "x"}]})
            assert response["error"]["code"] == -32603
            assert text_of(agent, sid) == "partial answer"


class TestPromptContent:
    async def test_all_prompt_block_types(self, scripted: Scripted, session: Start) -> None:
        agent = scripted([[{"text": "seen"}]])
        async with agent:
            sid = await session(agent)
            result = await agent.request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "look"},
                {"type": "resource_link", "uri": "file:///a/b.py", "name": "b.py"},
                {"type": "resource", "resource": {"uri": "file:///a/c.py", "text": "print(1)"}},
                {"type": "resource", "resource": {"uri": "file:///a/d.bin", "blob": "AAEC"}},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            ]})
            assert result["stopReason"] == "end_turn"

    async def test_audio_is_rejected_when_not_advertised(
        self, scripted: Scripted, session: Start
    ) -> None:
        agent = scripted([[{"text": "seen"}]])
        async with agent:
            sid = await session(agent)
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]})
            assert response["error"]["code"] == -32602


class TestCancelRunningTools:
    async def test_cancel_during_a_local_command_kills_it(
        self, scripted: Scripted, session: Start, tmp_path: Path
    ) -> None:
        """session/cancel while `run_command` runs: the turn answers `cancelled` and the
        command's process group is gone."""
        pidfile = tmp_path / "pid"
        command = f"echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; sleep 60"
        agent = scripted(
            [
                [{"tool_call": {"name": "run_command", "arguments": {"command": command}}}],
                [{"text": "next"}],
            ]
        )
        async with agent:
            sid = await session(agent)
            await agent.request("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
            task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "go"}]})
            await eventually(pidfile.exists, "the command runs")
            pid = int(pidfile.read_text())
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"]["stopReason"] == "cancelled"
            assert agent.updates_of(sid, "tool_call_update")[-1]["status"] == "failed"
            await group_gone(pid)
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"


class TestSeeingBeforeApproving:
    async def test_the_diff_comes_with_the_question(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        """An edit asks with its diff visible; an edit that cannot be made never asks."""
        edit = {"name": "edit_file", "arguments": {"path": "hello.txt", "old_string": "world",
                                                   "new_string": "there"}}
        missing = {"name": "edit_file", "arguments": {"path": "hello.txt", "old_string": "nope",
                                                      "new_string": "x"}}
        agent = scripted([[{"tool_call": edit}], [{"tool_call": missing}], [{"text": "ok"}]])
        async with agent:
            sid = await session(agent)
            assert (await agent.prompt(sid, "edit"))["stopReason"] == "end_turn"
            (question,) = agent.client_requests
            (diff,) = question["params"]["toolCall"]["content"]
            assert diff["type"] == "diff" and diff["oldText"] == "hello\nworld\n"
            assert diff["newText"] == "hello\nthere\n"
            shown = next(i for i, m in enumerate(agent.messages)
                         if m.get("method") == "session/update"
                         and m["params"]["update"].get("content", [{}])[0].get("type") == "diff")
            assert shown < agent.messages.index(question)  # on screen before the question
            calls = agent.tool_calls(sid)
            assert [c["status"] for c in calls] == ["completed", "failed"]
            assert (Path(workspace) / "hello.txt").read_text() == "hello\nthere\n"

    async def test_a_new_file_is_never_read_through_the_editor(
        self, scripted: Scripted, session: Start, workspace: str
    ) -> None:
        write = {"name": "write_file", "arguments": {"path": "new.txt", "content": "fresh\n"}}
        agent = scripted([[{"tool_call": write}], [{"text": "ok"}]])
        agent.handlers["fs/read_text_file"] = lambda p: {"content": "never asked"}
        agent.handlers["fs/write_text_file"] = lambda p: {}
        async with agent:
            sid = await session(agent, fs={"readTextFile": True, "writeTextFile": True})
            assert (await agent.prompt(sid, "write"))["stopReason"] == "end_turn"
            methods = [r["method"] for r in agent.client_requests]
            assert "fs/read_text_file" not in methods and "fs/write_text_file" in methods
