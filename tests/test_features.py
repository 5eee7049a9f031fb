"""Features end to end over real stdio: slash commands, notices, compaction, the thought
level option, MCP servers, and the editor's file system. Every emitted message is
validated against the official schema (the autouse checker)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, Usage
from .harness import AgentProcess, ResponseError, select_kind
from .limits import MCP_START, WAIT
from .procs import gone
from .schema_check import SchemaChecker

ROOT = Path(__file__).resolve().parent.parent
DEMO_MCP = str(ROOT / "tests/mcp/servers/demo.py")
DRAFT_CAPS: dict[str, Any] = {"session": {"notices": {}, "compaction": {}}, "plan": {}}
# MCP servers start in a second or so, or in many on a busy machine: the first prompt
# waits for them (a timer of the agent, set here to the tests' wait limit).
def _agent(checker: SchemaChecker, state_dir: str, tmp_path: Path,
           script: list[Any] | None = None, config: str = "",
           *args: str) -> AgentProcess:
    env: dict[str, str] = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    if script is not None:
        path = tmp_path / f"script{len(list(tmp_path.glob('script*')))}.json"
        path.write_text(json.dumps(script))
        env["ACP_AGENT_OFFLINE_SCRIPT"] = str(path)
    extra = list(args)
    if config:
        cfg = tmp_path / "config.toml"
        cfg.write_text(config)
        extra += ["--config", str(cfg)]
    return AgentProcess(checker, "--state-dir", state_dir, *extra, env=env)


def texts(agent: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates_of(sid, "agent_message_chunk"))


class TestSlashCommands:
    async def test_commands_are_advertised_and_user_commands_expand(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        commands = Path(workspace) / ".acp-agent" / "commands"
        commands.mkdir(parents=True)
        (commands / "review.md").write_text(
            "---\ndescription: Review a file\n---\nReview $ARGUMENTS carefully."
        )
        async with FakeLLMServer() as server:
            server.enqueue(Reply([Text("reviewed"), Usage(10, 2), Finish("stop")]))
            agent = _agent(checker, state_dir, tmp_path, None, "", "--model", "openai:gpt-4.1",
                           "--base-url", server.openai_url)
            agent.env["OPENAI_API_KEY"] = "k"
            async with agent:
                await agent.initialize()
                sid = await agent.new_session(workspace)
                await agent.wait_for(
                    lambda: bool(agent.updates_of(sid, "available_commands_update"))
                )
                listed = agent.updates_of(sid, "available_commands_update")[-1]["availableCommands"]
                names = [c["name"] for c in listed]
                assert {"help", "plan", "model", "mode", "compact", "review"} <= set(names)
                assert (await agent.prompt(sid, "/review src/app.py"))["stopReason"] == "end_turn"
                last_user = server.requests[0].body["messages"][-1]
                assert last_user["role"] == "user"
                assert "Review src/app.py carefully." in json.dumps(last_user["content"])

    async def test_builtins_answer_without_the_model(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(checker, state_dir, tmp_path, [[{"text": "model answer"}]])
        async with agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            assert (await agent.prompt(sid, "/help"))["stopReason"] == "end_turn"
            assert "/compact" in texts(agent, sid)
            assert (await agent.prompt(sid, "/mode plan"))["stopReason"] == "end_turn"
            assert agent.updates_of(sid, "current_mode_update")[-1]["currentModeId"] == "plan"
            options = agent.updates_of(sid, "config_option_update")[-1]["configOptions"]
            assert next(o for o in options if o["id"] == "mode")["currentValue"] == "plan"
            response = await agent.request_raw(
                "session/set_mode", {"sessionId": sid, "modeId": "nope"}
            )
            assert response["error"]["code"] == -32602
            # the script was not consumed by the built-ins: the model answers now
            await agent.prompt(sid, "hello")
            assert texts(agent, sid).endswith("model answer")

    async def test_plan_mode_refuses_edits_and_runs_commands_read_only(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(checker, state_dir, tmp_path, [
            [{"tool_call": {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}},
             {"tool_call": {"name": "run_command", "arguments": {"command": "touch y.txt"}}},
             {"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}}],
            [{"text": "planned"}]])
        agent.handlers["session/request_permission"] = select_kind("reject_once")
        async with agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "/plan add a feature")
            finals = {
                u["toolCallId"]: u["status"]
                for u in agent.updates_of(sid, "tool_call_update")
                if u.get("status") in ("completed", "failed")
            }
            assert sorted(finals.values()) == ["completed", "failed", "failed"]
            # an edit is refused unasked; a command is asked for (here: rejected)
            asked = [r["params"]["toolCall"]["title"] for r in agent.client_requests]
            assert asked == ["Run `touch y.txt` (sandboxed: read-only) (plan mode: allow it only if"
                             " it changes nothing)"]
            assert (
                not (Path(workspace) / "x.txt").exists()
                and not (Path(workspace) / "y.txt").exists()
            )


class TestModesAgainstToolKinds:
    @pytest.mark.parametrize(("mode", "asks", "runs"), [
        ("ask", {"edit", "execute"}, {"read", "edit", "execute"}),
        ("accept-edits", {"execute"}, {"read", "edit", "execute"}),
        ("auto", set(), {"read", "edit", "execute"}),  # the command in the sandbox
        ("plan", {"execute"}, {"read", "execute"}),  # a command: asked for, every time
        ("bypass", set(), {"read", "edit", "execute"}),
    ])
    async def test_mode_policy(
        self,
        checker: SchemaChecker,
        state_dir: str,
        workspace: str,
        tmp_path: Path,
        mode: str,
        asks: set[str],
        runs: set[str],
    ) -> None:
        calls = [
            {"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}},
            {"tool_call": {"name": "write_file", "arguments": {"path": "new.txt", "content": "n"}}},
            {"tool_call": {"name": "run_command", "arguments": {"command": "echo ran"}}},
        ]
        agent = _agent(checker, state_dir, tmp_path, [calls, [{"text": "done"}]])
        async with agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            await agent.request("session/set_mode", {"sessionId": sid, "modeId": mode})
            await agent.prompt(sid, "go")
            kinds = {u["toolCallId"]: u["kind"] for u in agent.updates_of(sid, "tool_call")}
            asked = {kinds[r["params"]["toolCall"]["toolCallId"]] for r in agent.client_requests
                     if r["method"] == "session/request_permission"}
            done = {kinds[u["toolCallId"]] for u in agent.updates_of(sid, "tool_call_update")
                    if u.get("status") == "completed"}
            assert asked == asks and done == runs


class TestNotices:
    async def test_retry_notice_only_with_the_capability(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        script = [[{"error": {"status": 429, "retry_after": 0.01}}], [{"text": "ok"}]]
        for caps, expected in [(DRAFT_CAPS, 1), ({}, 0)]:
            agent = _agent(checker, state_dir, tmp_path, script)
            async with agent:
                await agent.initialize(caps)
                sid = await agent.new_session(workspace)
                assert (await agent.prompt(sid, "x"))["stopReason"] == "end_turn"
                notices = agent.updates_of(sid, "notice")
                assert len(notices) == expected
                if notices:
                    assert notices[0]["severity"] == "warning" and notices[0]["title"]
                assert texts(agent, sid) == "ok"  # a retry is not worth a message in history

    async def test_notices_are_never_replayed(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(
            checker,
            state_dir,
            tmp_path,
            [[{"error": {"status": 503, "retry_after": 0.01}}], [{"text": "ok"}]],
        )
        async with agent:
            await agent.initialize(DRAFT_CAPS)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "x")
            assert agent.updates_of(sid, "notice")
        again = _agent(checker, state_dir, tmp_path)
        async with again:
            await again.initialize(DRAFT_CAPS)
            await again.request(
                "session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []}
            )
            assert again.updates_of(sid, "notice") == []
            assert "ok" in texts(again, sid)


class TestCompaction:
    SCRIPT: ClassVar[list[Any]] = [[{"text": "first answer"}], [{"text": "second answer"}],
              [{"text": "## Summary\n- the user asked twice"}], [{"text": "after"}]]

    async def test_compact_command_with_the_capability(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(checker, state_dir, tmp_path, self.SCRIPT)
        async with agent:
            await agent.initialize(DRAFT_CAPS)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            await agent.prompt(sid, "two")
            before = len(agent.updates_of(sid))
            assert (await agent.prompt(sid, "/compact keep the API notes"))[
                "stopReason"
            ] == "end_turn"
            updates = agent.updates_of(sid)[before:]
            kinds = [u["sessionUpdate"] for u in updates]
            first = kinds.index("compaction_update")
            statuses = [u["status"] for u in updates if u["sessionUpdate"] == "compaction_update"]
            assert statuses == ["in_progress", "completed"]
            chunks = [i for i, k in enumerate(kinds) if k == "compaction_summary_chunk"]
            last = max(i for i, k in enumerate(kinds) if k == "compaction_update")
            assert chunks and all(first < i < last for i in chunks)
            summary = "".join(updates[i]["content"]["text"] for i in chunks)
            assert "the user asked twice" in summary
            assert kinds[-1] == "usage_update"
            # the session continues on the summary
            assert (await agent.prompt(sid, "three"))["stopReason"] == "end_turn"
        # replay: one materialized compaction_update with its id and the full summary
        again = _agent(checker, state_dir, tmp_path)
        async with again:
            await again.initialize(DRAFT_CAPS)
            await again.request(
                "session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []}
            )
            replayed = again.updates_of(sid, "compaction_update")
            assert len(replayed) == 1 and replayed[0]["status"] == "completed"
            assert "the user asked twice" in json.dumps(replayed[0]["summary"])
            assert again.updates_of(sid, "compaction_summary_chunk") == []
        plain = _agent(checker, state_dir, tmp_path)  # no capability: nothing of it replayed
        async with plain:
            await plain.initialize({})
            await plain.request(
                "session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []}
            )
            assert plain.updates_of(sid, "compaction_update") == []

    async def test_compact_without_the_capability_is_a_message(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(checker, state_dir, tmp_path, self.SCRIPT)
        async with agent:
            await agent.initialize({})
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            await agent.prompt(sid, "two")
            await agent.prompt(sid, "/compact")
            assert agent.updates_of(sid, "compaction_update") == []
            assert "the user asked twice" in texts(agent, sid)

    async def test_model_sees_the_summary_instead_of_the_old_history(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        async with FakeLLMServer() as server:
            server.enqueue(Reply([Text("a1"), Usage(10, 2), Finish("stop")]),
                           Reply([Text("a2"), Usage(10, 2), Finish("stop")]),
                           Reply([Text("SUMMARY-TEXT"), Usage(10, 2), Finish("stop")]),
                           Reply([Text("a3"), Usage(10, 2), Finish("stop")]))
            agent = _agent(checker, state_dir, tmp_path, None, "", "--model", "openai:gpt-4.1",
                           "--base-url", server.openai_url)
            agent.env["OPENAI_API_KEY"] = "k"
            async with agent:
                await agent.initialize(DRAFT_CAPS)
                sid = await agent.new_session(workspace)
                await agent.prompt(sid, "FIRST-QUESTION")
                await agent.prompt(sid, "SECOND-QUESTION")
                await agent.prompt(sid, "/compact")
                await agent.prompt(sid, "THIRD-QUESTION")
            summary_request = json.dumps(server.requests[2].body["messages"])
            assert "FIRST-QUESTION" in summary_request
            # the session's own system prompt and tools: valid with any history, cached prefix
            normal, summary = server.requests[1].body, server.requests[2].body
            assert summary["tools"] == normal["tools"]
            assert summary["messages"][0] == normal["messages"][0]
            after = json.dumps(server.requests[3].body["messages"])
            assert "SUMMARY-TEXT" in after and "FIRST-QUESTION" not in after
            assert "THIRD-QUESTION" in after

    async def test_automatic_compaction_when_the_context_fills(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        config = '[limits]\ncompact-at = 0.5\n[model-overrides.offline]\ncontext-window = 400\n'
        script = [
            [
                {"text": "x " * 40, "usage": {}},
                {"usage": {"input_tokens": 300, "output_tokens": 20}},
            ],
            [{"text": "## Summary\n- long talk"}],
            [{"text": "fresh"}],
        ]
        agent = _agent(checker, state_dir, tmp_path, script, config)
        async with agent:
            await agent.initialize(DRAFT_CAPS)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            assert (await agent.prompt(sid, "two"))["stopReason"] == "end_turn"
            statuses = [u["status"] for u in agent.updates_of(sid, "compaction_update")]
            assert statuses == ["in_progress", "completed"]
            assert any(
                n["title"] == "Compacting the conversation" for n in agent.updates_of(sid, "notice")
            )
            assert texts(agent, sid).endswith("fresh")

    async def test_cancel_during_compaction(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        script = [
            [{"text": "a"}],
            [{"text": "partial summary "}, {"hang": True}],
            [{"text": "next"}],
        ]
        agent = _agent(checker, state_dir, tmp_path, script)
        async with agent:
            await agent.initialize(DRAFT_CAPS)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "one")
            task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "/compact"}]})
            await agent.wait_for(lambda: bool(agent.updates_of(sid, "compaction_summary_chunk")))
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"]["stopReason"] == "cancelled"
            statuses = [u["status"] for u in agent.updates_of(sid, "compaction_update")]
            assert statuses == ["in_progress", "cancelled"]
            assert (await agent.prompt(sid, "again"))["stopReason"] == "end_turn"


class TestThoughtLevel:
    async def test_offered_only_for_thinking_models(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(
            checker, state_dir, tmp_path, None, "", "--model", "anthropic:claude-sonnet-4-5"
        )
        agent.env["ANTHROPIC_API_KEY"] = "test-key"
        async with agent:
            await agent.initialize()
            result = await agent.request("session/new", {"cwd": workspace, "mcpServers": []})
            options = {o["id"]: o for o in result["configOptions"]}
            assert options["thought_level"]["category"] == "thought_level"
            changed = await agent.request("session/set_config_option", {
                "sessionId": result["sessionId"], "configId": "thought_level", "value": "high"})
            assert (
                next(o for o in changed["configOptions"] if o["id"] == "thought_level")[
                    "currentValue"
                ]
                == "high"
            )
        offline = _agent(checker, state_dir, tmp_path)
        async with offline:
            await offline.initialize()
            result = await offline.request("session/new", {"cwd": workspace, "mcpServers": []})
            assert "thought_level" not in {o["id"] for o in result["configOptions"]}


def _mcp(name: str, *args: str) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [DEMO_MCP, *args], "env": []}


class TestMcp:
    async def test_mcp_tool_reaches_the_model_and_the_server_stops_at_eof(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        pid_file = tmp_path / "mcp.pid"
        script = [
            [{"tool_call": {"name": "mcp__demo__echo", "arguments": {"text": "hi from mcp"}}}],
            [{"text": "done"}],
        ]
        agent = _agent(checker, state_dir, tmp_path, script, MCP_START)
        async with agent:
            await agent.initialize({"session": {"notices": {}}})
            result = await agent.request("session/new", {
                "cwd": workspace, "mcpServers": [_mcp("demo", "--pid-file", str(pid_file))]})
            sid = result["sessionId"]
            assert (await agent.prompt(sid, "use the tool"))["stopReason"] == "end_turn"
            (call,) = agent.updates_of(sid, "tool_call")
            assert call["kind"] == "read" and "demo" in call["title"]
            final = agent.updates_of(sid, "tool_call_update")[-1]
            assert final["status"] == "completed" and "hi from mcp" in json.dumps(final["content"])
            assert not agent.client_requests  # read-only MCP tools run without asking
            commands = agent.updates_of(sid, "available_commands_update")[-1]["availableCommands"]
            assert "mcp:demo:greet" in {c["name"] for c in commands}
            pid = int(pid_file.read_text())
        await gone(pid)  # after EOF the server process is gone

    async def test_a_server_that_fails_is_reported(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        broken = {"name": "broken", "command": sys.executable,
                  "args": [str(ROOT / "tests/mcp/servers/exit_at_once.py")], "env": []}
        cases: list[tuple[dict[str, Any], str]] = [({"session": {"notices": {}}}, "notice"),
                                                   ({}, "agent_message_chunk")]
        for caps, kind in cases:
            agent = _agent(checker, state_dir, tmp_path, [[{"text": "still here"}]], MCP_START)
            async with agent:
                await agent.initialize(caps)
                result = await agent.request(
                    "session/new", {"cwd": workspace, "mcpServers": [broken]}
                )
                sid = result["sessionId"]
                assert (await agent.prompt(sid, "x"))["stopReason"] == "end_turn"
                reported = json.dumps(agent.updates_of(sid, kind))
                assert "broken" in reported
                if kind == "agent_message_chunk":
                    assert agent.updates_of(sid, "notice") == []

    async def test_mcp_prompt_as_slash_command(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        async with FakeLLMServer() as server:
            server.enqueue(Reply([Text("hello Ada"), Usage(10, 2), Finish("stop")]))
            agent = _agent(checker, state_dir, tmp_path, None, MCP_START, "--model",
                           "openai:gpt-4.1", "--base-url", server.openai_url)
            agent.env["OPENAI_API_KEY"] = "k"
            async with agent:
                await agent.initialize()
                result = await agent.request(
                    "session/new", {"cwd": workspace, "mcpServers": [_mcp("demo")]})
                sid = result["sessionId"]
                await agent.wait_for(lambda: any(
                    "mcp:demo:greet" in json.dumps(u)
                    for u in agent.updates_of(sid, "available_commands_update")))
                assert (await agent.prompt(sid, "/mcp:demo:greet Ada"))["stopReason"] == "end_turn"
            assert "Please greet Ada warmly." in json.dumps(server.requests[0].body["messages"])


class TestEditorFileSystem:
    async def test_reads_and_writes_go_through_the_editor_when_advertised(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        script = [
            [{"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}}],
            [
                {
                    "tool_call": {
                        "name": "write_file",
                        "arguments": {"path": "out.txt", "content": "new"},
                    }
                }
            ],
            [{"text": "done"}],
        ]
        agent = _agent(checker, state_dir, tmp_path, script, "", "--mode", "bypass")
        buffers = {os.path.join(workspace, "hello.txt"): "unsaved editor text\n"}
        written: dict[str, str] = {}
        def read(p: dict[str, Any]) -> dict[str, Any]:
            if p["path"] not in buffers:
                raise ResponseError({"code": -32002, "message": "Resource not found"})
            return {"content": buffers[p["path"]]}

        agent.handlers["fs/read_text_file"] = read
        agent.handlers["fs/write_text_file"] = lambda p: (
            written.update({p["path"]: p["content"]}) or {}
        )
        async with agent:
            await agent.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "go")
            results = [
                u
                for u in agent.updates_of(sid, "tool_call_update")
                if u.get("status") == "completed"
            ]
            assert "unsaved editor text" in json.dumps(results[0])
            assert written == {os.path.join(workspace, "out.txt"): "new"}
            assert not (Path(workspace) / "out.txt").exists()  # the editor owns the write

    async def test_no_editor_calls_without_the_capabilities(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        script = [[{"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}},
                   {"tool_call": {"name": "run_command", "arguments": {"command": "echo local"}}}],
                  [{"text": "done"}]]
        agent = _agent(checker, state_dir, tmp_path, script, "", "--mode", "bypass")
        async with agent:
            await agent.initialize(
                {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
            )
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "go")
            assert agent.client_requests == []
            assert "local" in json.dumps(agent.updates_of(sid, "tool_call_update"))


class TestRememberedPermissions:
    async def test_always_allow_is_scoped_and_survives_a_restart(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        echo = {"tool_call": {"name": "run_command", "arguments": {"command": "echo one"}}}
        echo_again = {"tool_call": {"name": "run_command", "arguments": {"command": "echo  one"}}}
        echo2 = {"tool_call": {"name": "run_command", "arguments": {"command": "echo two"}}}
        agent = _agent(checker, state_dir, tmp_path, [[echo], [{"text": "ok"}]])
        from .harness import select_kind

        agent.handlers["session/request_permission"] = select_kind("allow_always")
        async with agent:
            await agent.initialize()
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "x")
            assert len(agent.client_requests) == 1
        # everything the agent keeps is private: directories 0700, files 0600 (or 0400: the
        # objects of a checkpoints' shadow repository, which git makes read-only)
        import stat

        modes = {}
        for root, _, files in os.walk(state_dir):
            modes[root] = stat.S_IMODE(os.stat(root).st_mode)
            for name in files:
                path = os.path.join(root, name)
                modes[path] = stat.S_IMODE(os.stat(path).st_mode)
        assert len(modes) >= 6 and all(
            mode == 0o700 if os.path.isdir(path) else mode in (0o600, 0o400)
            for path, mode in modes.items()
        ), modes
        # a new process, a new session in the same project: `echo one` no longer asks, but
        # the answer covers exactly that command: `echo two` asks
        again = _agent(checker, state_dir, tmp_path,
                       [[echo_again], [{"text": "ok"}], [echo2], [{"text": "ok"}]])
        again.handlers["session/request_permission"] = select_kind("reject_once")
        async with again:
            await again.initialize()
            sid = await again.new_session(workspace)
            await again.prompt(sid, "y")
            assert again.client_requests == []
            await again.prompt(sid, "z")
            assert len(again.client_requests) == 1
        # another project is not affected
        other = tmp_path / "other"
        other.mkdir()
        third = _agent(checker, state_dir, tmp_path, [[echo], [{"text": "ok"}]])
        third.handlers["session/request_permission"] = select_kind("reject_once")
        async with third:
            await third.initialize()
            sid = await third.new_session(str(other))
            await third.prompt(sid, "w")
            assert len(third.client_requests) == 1


class EditorTerminals:
    """A client's terminals: real processes behind terminal/* requests."""

    def __init__(self) -> None:
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.buffers: dict[str, bytes] = {}
        self.calls: list[str] = []
        self.readers: dict[str, asyncio.Task[None]] = {}

    def install(self, agent: AgentProcess) -> None:
        for name in ("create", "output", "wait_for_exit", "kill", "release"):
            agent.handlers[f"terminal/{name}"] = getattr(self, name)

    async def create(self, p: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        tid = f"term_{len(self.procs) + 1}"
        proc = await asyncio.create_subprocess_exec(
            p["command"], *p.get("args", []), cwd=p.get("cwd"), start_new_session=True,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        self.procs[tid], self.buffers[tid] = proc, b""

        async def pump() -> None:
            assert proc.stdout
            while chunk := await proc.stdout.read(4096):
                self.buffers[tid] += chunk
        self.readers[tid] = asyncio.create_task(pump())
        return {"terminalId": tid}

    async def output(self, p: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("output")
        tid = p["terminalId"]
        proc = self.procs[tid]
        if proc.returncode is not None:  # exited: all of its output, read to the end
            await asyncio.wait_for(self.readers[tid], WAIT)
        result: dict[str, Any] = {
            "output": self.buffers[tid].decode(errors="replace"),
            "truncated": False,
        }
        if proc.returncode is not None:
            result["exitStatus"] = {"exitCode": proc.returncode}
        return result

    async def wait_for_exit(self, p: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("wait_for_exit")
        tid = p["terminalId"]
        code = await self.procs[tid].wait()
        await self.readers[tid]
        return {"exitCode": code} if code >= 0 else {"signal": "SIGKILL"}

    async def kill(self, p: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("kill")
        self._kill_group(p["terminalId"])
        return {}

    def _kill_group(self, tid: str) -> None:
        """Like an editor: the whole process group (the shell and what it started)."""
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[tid].pid, signal.SIGKILL)

    async def release(self, p: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("release")
        self._kill_group(p["terminalId"])
        return {}


class TestEditorTerminal:
    async def test_commands_run_in_the_editors_terminal(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        script = [
            [
                {
                    "tool_call": {
                        "name": "run_command",
                        "arguments": {"command": "echo in-the-editor"},
                    }
                }
            ],
            [{"text": "done"}],
        ]
        agent = _agent(checker, state_dir, tmp_path, script, "", "--mode", "bypass")
        terminals = EditorTerminals()
        terminals.install(agent)
        async with agent:
            await agent.initialize({"terminal": True})
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "go")
            assert terminals.calls[0] == "create" and terminals.calls[-1] == "release"
            content = json.dumps(agent.updates_of(sid, "tool_call_update"))
            assert '"type": "terminal"' in content and "term_1" in content
            assert agent.updates_of(sid, "tool_call_update")[-1]["status"] == "completed"

    async def test_cancel_kills_and_releases_the_editors_terminal(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        script = [[{"tool_call": {"name": "run_command", "arguments": {"command": "sleep 60"}}}],
                  [{"text": "next"}]]
        agent = _agent(checker, state_dir, tmp_path, script, "", "--mode", "bypass")
        terminals = EditorTerminals()
        terminals.install(agent)
        async with agent:
            await agent.initialize({"terminal": True})
            sid = await agent.new_session(workspace)
            task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [
                {"type": "text", "text": "go"}]})
            await agent.wait_for(lambda: any(r["method"] == "terminal/wait_for_exit"
                                             for r in agent.client_requests))
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await task)["result"]["stopReason"] == "cancelled"
            await agent.wait_for(lambda: "release" in terminals.calls)
            assert "kill" in terminals.calls
            await asyncio.wait_for(terminals.readers["term_1"], WAIT)  # its output closed
            await gone(terminals.procs["term_1"].pid)


class TestAuthentication:
    async def test_missing_key_is_auth_required_until_configured(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        agent = _agent(checker, state_dir, tmp_path, None, "", "--model", "openai:gpt-4.1")
        async with agent:
            init = await agent.initialize()
            (method,) = init["authMethods"]
            assert "type" not in method and "OPENAI_API_KEY" in method["description"]
            response = await agent.request_raw("session/new", {"cwd": workspace, "mcpServers": []})
            assert response["error"]["code"] == -32000
            assert "OPENAI_API_KEY" in response["error"]["message"]
            response = await agent.request_raw("authenticate", {"methodId": method["id"]})
            assert response["error"]["code"] == -32000
            response = await agent.request_raw("authenticate", {"methodId": "nope"})
            assert response["error"]["code"] == -32602
        keyed = _agent(checker, state_dir, tmp_path, None, "", "--model", "openai:gpt-4.1")
        keyed.env["OPENAI_API_KEY"] = "sk-test"
        async with keyed:
            init = await keyed.initialize()
            assert (
                await keyed.request("authenticate", {"methodId": init["authMethods"][0]["id"]})
                == {}
            )
            assert await keyed.new_session(workspace)
        local = _agent(checker, state_dir, tmp_path, None, "", "--model", "openai:qwen",
                       "--base-url", "http://127.0.0.1:9/v1")  # a local server needs no key
        async with local:
            await local.initialize()
            assert await local.new_session(workspace)


class TestModelFallbackNotice:
    async def test_a_model_no_longer_configured_falls_back_with_a_notice(
        self, checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path
    ) -> None:
        first = _agent(
            checker, state_dir, tmp_path, None, 'models = ["anthropic:claude-sonnet-4-5"]\n'
        )
        first.env["ANTHROPIC_API_KEY"] = "k"
        async with first:
            await first.initialize()
            sid = await first.new_session(workspace)
            await first.request("session/set_config_option", {
                "sessionId": sid, "configId": "model", "value": "anthropic:claude-sonnet-4-5"})
        (tmp_path / "config.toml").unlink()
        second = _agent(checker, state_dir, tmp_path)
        async with second:
            await second.initialize({"session": {"notices": {}}})
            result = await second.request(
                "session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []}
            )
            model = next(o for o in result["configOptions"] if o["id"] == "model")
            assert model["currentValue"] == "offline"
            await second.wait_for(lambda: bool(second.updates_of(sid, "notice")))
            (notice,) = second.updates_of(sid, "notice")
            assert (
                notice["title"] == "Model not available"
                and "claude-sonnet-4-5" in notice["description"]
            )
