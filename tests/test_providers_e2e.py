"""Whole turns through the real openai/anthropic SDKs: agent subprocess -> SDK -> a local
HTTP server on 127.0.0.1 speaking the vendor's SSE format."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.llm_server import (
    FakeLLMServer,
    Finish,
    Hang,
    HttpError,
    Reply,
    Text,
    Thinking,
    ToolCall,
    Usage,
)
from .fakes.llm_wire import anthropic_events, openai_events
from .harness import AgentProcess, agent_env
from .limits import WAIT
from .schema_check import SchemaChecker


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def openai_agent(
    checker: SchemaChecker, state_dir: str, server: FakeLLMServer, *extra: str
) -> AgentProcess:
    return AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                        "--base-url", server.openai_url, "--mode", "bypass", *extra,
                        env={"OPENAI_API_KEY": "test-key"})


def anthropic_agent(checker: SchemaChecker, state_dir: str, server: FakeLLMServer) -> AgentProcess:
    return AgentProcess(checker, "--state-dir", state_dir, "--model", "anthropic:claude-sonnet-4-5",
                        "--base-url", server.url, "--mode", "bypass",
                        env={"ANTHROPIC_API_KEY": "test-key"})


def text_of(agent: AgentProcess, sid: str, kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, kind))


async def _start(agent: AgentProcess, workspace: str) -> str:
    await agent.initialize()
    return await agent.new_session(workspace)


class TestOpenAI:
    async def test_tool_loop_through_the_sdk(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        """Text streams, a tool call assembled from fragments runs, its result goes back."""
        server.enqueue(
            Reply(
                [
                    Text("Let me look. "),
                    ToolCall("call_a", "read_file", json.dumps({"path": "hello.txt"}), pieces=4),
                    Usage(120, 30),
                    Finish("tool_calls"),
                ]
            ),
            Reply([Text("It says hello"), Text(" world."), Usage(200, 10), Finish("stop")]),
        )
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            result = await agent.prompt(sid, "what is in hello.txt?")
            assert result["stopReason"] == "end_turn"
            assert result["usage"] == {"totalTokens": 360, "inputTokens": 320, "outputTokens": 40}
            assert text_of(agent, sid) == "Let me look. It says hello world."
            (call,) = agent.tool_calls(sid)
            assert call["kind"] == "read" and call["rawInput"] == {"path": "hello.txt"}
            assert agent.updates_of(sid, "tool_call_update")[-1]["status"] == "completed"
            # the second request carried the tool result back to the model
            second = server.requests[1].body["messages"]
            tool_msg = next(m for m in second if m["role"] == "tool")
            assert tool_msg["tool_call_id"] == "call_a" and "hello" in tool_msg["content"]
            assert second[0]["role"] == "system"
            usage = agent.updates_of(sid, "usage_update")[-1]
            assert (
                usage["used"] == 210
                and usage["size"] > 100_000
                and usage["cost"]["currency"] == "USD"
            )

    async def test_reasoning_becomes_thoughts(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(Reply([Thinking("pondering", field="reasoning_content"), Text("answer"),
                              Finish("stop")]))
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            await agent.prompt(sid, "q")
            assert text_of(agent, sid, "agent_thought_chunk") == "pondering"
            assert text_of(agent, sid) == "answer"

    async def test_length_and_content_filter(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(Reply([Text("trunc"), Finish("length")]),
                       Reply([Text("no"), Finish("content_filter")]))
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            assert (await agent.prompt(sid, "a"))["stopReason"] == "max_tokens"
            assert (await agent.prompt(sid, "b"))["stopReason"] == "refusal"

    async def test_rate_limit_retried_with_retry_after(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(HttpError(429, {"error": {"message": "slow down"}}, {"retry-after": "0.1"}),
                       HttpError(500, {"error": {"message": "oops"}}, {"retry-after": "0.05"}),
                       Reply([Text("ok"), Finish("stop")]))
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            assert (await agent.prompt(sid, "a"))["stopReason"] == "end_turn"
            assert len(server.requests) == 3

    async def test_rejected_key_is_auth_required(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(HttpError(401, {"error": {"message": "invalid api key"}}))
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "a"}]})
            assert response["error"]["code"] == -32000

    async def test_cancel_mid_stream_closes_the_http_stream(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(Reply([Text("partial "), Text("more")], hang_after=2))
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "a"}]})
            await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"]["stopReason"] == "cancelled"
            await asyncio.wait_for(server.requests[0].disconnected.wait(), WAIT)

    async def test_cancel_while_the_server_never_answers(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(Hang())
        async with openai_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "a"}]})
            await server.wait_for_requests(1)
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"]["stopReason"] == "cancelled"

    async def test_a_hung_server_ends_the_turn_with_an_error(
        self,
        checker: SchemaChecker,
        state_dir: str,
        workspace: str,
        server: FakeLLMServer,
        tmp_path: Path,
    ) -> None:
        """No prompt is left unanswered: a silent server times out (short timeout here,
        counted once the agent is warm: its connection to the server open ahead)."""
        config = tmp_path / "c.toml"
        config.write_text(
            "[limits]\nfirst-event-timeout = 0.5\nmax-retries = 1\nretry-max-delay = 0.05\n"
        )
        server.enqueue(Hang(), Hang())
        async with openai_agent(checker, state_dir, server, "--config", str(config),
                                "--log-level", "debug") as agent:  # fmt: skip
            sid = await _start(agent, workspace)
            await agent.logged("connected ahead")
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "a"}]})
            assert response["error"]["code"] == -32603
            assert "within 0.5 s (limits.first-event-timeout)" in response["error"]["message"]
            assert len(server.requests) == 2


class TestAnthropic:
    async def test_thinking_tools_and_signatures(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        """Thinking streams as thoughts and its signed block goes back with the tool result."""
        server.enqueue(
            Reply([Thinking("I should list files", signature="sig-1"),
                   ToolCall("toolu_1", "list_directory", json.dumps({"path": "."}), pieces=3),
                   Usage(50, 20), Finish("tool_use")]),
            Reply([Text("There is hello.txt."), Usage(80, 5), Finish("end_turn")]),
        )
        async with anthropic_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            result = await agent.prompt(sid, "what files?")
            assert result["stopReason"] == "end_turn"
            assert text_of(agent, sid, "agent_thought_chunk") == "I should list files"
            assert text_of(agent, sid) == "There is hello.txt."
            body: dict[str, Any] = server.requests[1].body
            assistant = next(m for m in body["messages"] if m["role"] == "assistant")
            assert assistant["content"][0] == {
                "type": "thinking",
                "thinking": "I should list files",
                "signature": "sig-1",
            }
            user_results = body["messages"][-1]["content"]
            assert user_results[0]["type"] == "tool_result" and "hello.txt" in json.dumps(
                user_results
            )

    async def test_refusal(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
    ) -> None:
        server.enqueue(Reply([Text("I won't."), Finish("refusal")]))
        async with anthropic_agent(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            assert (await agent.prompt(sid, "x"))["stopReason"] == "refusal"


class TestLazyImports:
    async def test_sdks_are_not_imported_before_the_first_reply(self, tmp_path: Path) -> None:
        """initialize and session/new never import openai/anthropic on the reply path."""
        code = (
            "import sys, asyncio\n"
            "from acp_agent.handlers.agent import Agent\n"
            "from acp_agent import config\n"
            "import acp_agent.server, acp_agent.cli\n"
            "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules, "
            "sorted(sys.modules)\n"
        )
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=str(tmp_path),
                                                    env=agent_env())
        assert await proc.wait() == 0


class TestLiveToolCalls:
    """A tool call is shown as the model starts it and titled from its arguments while
    they stream: the user sees "Write notes.txt" while the content is still being written."""

    @pytest.mark.parametrize("vendor", ["openai", "anthropic"])
    async def test_the_title_comes_before_the_arguments_end(
        self, checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
        vendor: str,
    ) -> None:
        content = "A" * 1500 + "MARK" + "B" * 1500
        arguments = json.dumps({"path": "notes.txt", "content": content})
        steps: list[Any] = [ToolCall("call_w", "write_file", arguments, pieces=24),
                            Finish("tool_calls")]
        wire = (openai_events(steps, "gpt-4.1") if vendor == "openai"
                else anthropic_events(steps, "claude-sonnet-4-5"))
        cut = next(i for i, event in enumerate(wire) if b"MARK" in event)
        server.enqueue(Reply(steps, hang_after=cut))  # stalls in the middle of "content"
        make = openai_agent if vendor == "openai" else anthropic_agent
        async with make(checker, state_dir, server) as agent:
            sid = await _start(agent, workspace)
            turn = agent.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})

            def titled() -> list[dict[str, Any]]:
                return [u for u in agent.updates_of(sid, "tool_call_update")
                        if u.get("title") == "Write notes.txt"]

            await agent.wait_for(lambda: bool(titled()))
            (shown,) = agent.updates_of(sid, "tool_call")
            assert (shown["title"], shown["status"], shown["kind"]) == (
                "write_file", "pending", "edit")
            (update,) = titled()
            assert update["toolCallId"] == shown["toolCallId"]
            assert update["locations"] == [{"path": str(Path(workspace) / "notes.txt")}]
            assert "status" not in update and "rawInput" not in update
            assert not (Path(workspace) / "notes.txt").exists()  # still being written
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await turn)["result"]["stopReason"] == "cancelled"
            final = agent.tool_calls(sid)[0]
            assert final["status"] == "failed" and final["title"] == "Write notes.txt"
