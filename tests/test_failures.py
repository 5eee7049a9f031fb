"""Error paths end to end: a compaction that fails, tool calls with arguments the tool
cannot take, permission answers the agent does not know, and a state directory the
agent cannot use. In each the turn ends normally and the session carries on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage
from .harness import AgentProcess, Scripted, select_kind
from .schema_check import SchemaChecker

Script = list[list[dict[str, Any]]]
COMPACTION_CAPS: dict[str, Any] = {"session": {"compaction": {}}}


def text_of(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


def final_updates(agent: AgentProcess, sid: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates_of(sid, "tool_call_update")
            if u.get("status") in ("completed", "failed")]


def content_text(update: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in update.get("content") or []
                   if c.get("type") == "content")


# ---------------------------------------------------------------------- compaction


FAILING_SUMMARY: Script = [
    [{"text": "first"}], [{"text": "second"}],
    [{"error": {"status": 400, "message": "context too long for a summary"}}],  # /compact
    [{"text": "still talking"}],
]


class TestCompactionFailures:

    async def test_a_failed_compaction_is_reported_and_the_history_kept(
        self, scripted: Scripted, workspace: str
    ) -> None:
        async with scripted(FAILING_SUMMARY) as agent:
            await agent.initialize(COMPACTION_CAPS)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            await agent.prompt(sid, "two")
            assert (await agent.prompt(sid, "/compact"))["stopReason"] == "end_turn"
            updates = agent.updates_of(sid, "compaction_update")
            assert [u["status"] for u in updates] == ["in_progress", "failed"]
            assert "context too long" in updates[-1]["error"]
            assert (await agent.prompt(sid, "three"))["stopReason"] == "end_turn"
            assert text_of(agent, sid).endswith("still talking")

    async def test_without_the_capability_the_failure_is_a_message(
        self, scripted: Scripted, workspace: str
    ) -> None:
        async with scripted(FAILING_SUMMARY) as agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            await agent.prompt(sid, "two")
            await agent.prompt(sid, "/compact")
            assert agent.updates_of(sid, "compaction_update") == []
            assert "Compaction failed: context too long for a summary" in text_of(agent, sid)
            assert "The history is unchanged" in text_of(agent, sid)

    async def test_an_empty_summary_is_a_failure(self, scripted: Scripted, workspace: str) -> None:
        script: Script = [[{"text": "first"}], [{"text": "second"}], [{"finish": "stop"}]]
        async with scripted(script) as agent:
            await agent.initialize(COMPACTION_CAPS)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            await agent.prompt(sid, "two")
            await agent.prompt(sid, "/compact")
            (failed,) = [u for u in agent.updates_of(sid, "compaction_update")
                         if u["status"] == "failed"]
            assert "empty summary" in failed["error"]

    async def test_nothing_to_compact_yet(self, scripted: Scripted, workspace: str) -> None:
        async with scripted([]) as agent:
            await agent.initialize(COMPACTION_CAPS)
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "/compact"))["stopReason"] == "end_turn"
            assert "Nothing to compact yet." in text_of(agent, sid)
            assert agent.updates_of(sid, "compaction_update") == []


# ---------------------------------------------------------------------- tool arguments


class TestInvalidToolArguments:
    async def test_arguments_the_tool_cannot_take_fail_the_call_not_the_turn(
        self, scripted: Scripted, workspace: str
    ) -> None:
        """Each bad call is announced, fails with the reason (nothing is asked or run),
        and the model gets the reason as the call's result."""
        bad = [{"tool_call": {"name": "read_file", "arguments": {"path": 3}}},
               {"tool_call": {"name": "run_command", "arguments": {"command": ""}}},
               {"tool_call": {"name": "write_file", "arguments": {"content": "x"}}}]
        async with scripted([bad, [{"text": "I will fix my arguments."}]]) as agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            calls = agent.updates_of(sid, "tool_call")
            assert [c["status"] for c in calls] == ["pending"] * 3
            finals = final_updates(agent, sid)
            assert [u["status"] for u in finals] == ["failed"] * 3
            for name, update in zip(["read_file", "run_command", "write_file"], finals,
                                    strict=True):
                assert content_text(update).startswith(f"Invalid arguments for {name}")
            assert agent.client_requests == []  # nothing asked permission
            assert not (Path(workspace) / "x").exists()
            assert text_of(agent, sid) == "I will fix my arguments."

    async def test_arguments_that_are_not_json_fail_the_call(
        self, checker: SchemaChecker, state_dir: str, workspace: str
    ) -> None:
        """A provider's tool call whose argument text is not a JSON object."""
        async with FakeLLMServer() as server:
            server.enqueue(
                Reply([ToolCall("call_1", "read_file", '{"path": "hello.txt"', pieces=2),
                       Usage(10, 5), Finish("tool_calls")]),
                Reply([Text("Sorry."), Usage(20, 2), Finish("stop")]),
            )
            agent = AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                                 "--base-url", server.openai_url, env={"OPENAI_API_KEY": "k"})
            async with agent:
                await agent.initialize()
                sid = await agent.new_session(workspace)
                assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
                (final,) = final_updates(agent, sid)
                assert final["status"] == "failed"
                assert "Send one JSON object" in content_text(final)
            result = next(m for m in server.requests[1].body["messages"] if m["role"] == "tool")
            assert "Invalid arguments for read_file" in result["content"]


# ---------------------------------------------------------------------- permission answers


class TestPermissionAnswers:
    async def test_an_unknown_option_is_a_rejection(
        self, scripted: Scripted, workspace: str
    ) -> None:
        echo = {"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}
        async with scripted([[echo], [{"text": "ok"}]]) as agent:
            agent.handlers["session/request_permission"] = lambda p: {
                "outcome": {"outcome": "selected", "optionId": "maybe-later"}}
            await agent.initialize()
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            (final,) = final_updates(agent, sid)
            assert final["status"] == "failed"
            assert "an option that was not offered ('maybe-later')" in content_text(final)

    async def test_reject_always_refuses_the_next_call_without_asking(
        self, scripted: Scripted, workspace: str
    ) -> None:
        echo = {"tool_call": {"name": "run_command", "arguments": {"command": "echo hi"}}}
        async with scripted([[echo], [echo], [{"text": "ok"}]]) as agent:
            agent.handlers["session/request_permission"] = select_kind("reject_always")
            await agent.initialize()
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            assert len(agent.client_requests) == 1
            first, second = final_updates(agent, sid)
            assert "The user rejected this tool call." in content_text(first)
            assert "Refused: the user rejected this kind of call." in content_text(second)


# ---------------------------------------------------------------------- the state directory


async def test_an_unusable_state_directory_keeps_the_conversation_going(
    checker: SchemaChecker, tmp_path: Path, workspace: str
) -> None:
    """Sessions cannot be stored (the state directory is a file): they live in memory,
    and the agent says so in its log."""
    state = tmp_path / "state-file"
    state.write_text("not a directory")
    async with AgentProcess(checker, "--state-dir", str(state)) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "hello"))["stopReason"] == "end_turn"
        assert (await agent.prompt(sid, "hello again"))["stopReason"] == "end_turn"
    assert b"it lives in memory only" in agent.stderr
