"""Durable sessions end to end over stdio: load (replay), resume, fork, list, delete,
titles, additionalDirectories, crashes (SIGKILL) and several processes on one state dir."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage
from .harness import AgentProcess, ResponseError
from .limits import eventually
from .schema_check import SchemaChecker

Script = list[list[dict[str, Any]]]
Make = Callable[..., AgentProcess]  # the `make` fixture: a script and flags -> an agent

#: State, not history: the load response and the usage_update after it carry these.
STATE_KINDS = {
    "usage_update",
    "current_mode_update",
    "config_option_update",
    "available_commands_update",
    "session_info_update",
}
CHUNK_KINDS = {"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"}

TOOL_TURN: Script = [
    [
        {"thinking": "The user wants the file."},
        {"text": "Let me read it. "},
        {"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}},
    ],
    [{"text": "It says hello and world."}],
]
PLAN_AND_COMMAND_TURN: Script = [
    [
        {
            "tool_call": {
                "name": "update_plan",
                "arguments": {
                    "entries": [{"content": "Run it", "priority": "high", "status": "in_progress"}]
                },
            }
        },
        {"tool_call": {"name": "run_command", "arguments": {"command": "echo from-the-shell"}}},
    ],
    [{"thinking": "It worked."}, {"text": "The command printed from-the-shell, all done."}],
]


@pytest.fixture
def make(checker: SchemaChecker, state_dir: str, tmp_path: Path) -> Make:
    """An agent on the shared state dir; ``script`` drives its offline model."""
    count = iter(range(1000))

    def make_agent(script: Script | None = None, *args: str) -> AgentProcess:
        env = {}
        if script is not None:
            path = tmp_path / f"script{next(count)}.json"
            path.write_text(json.dumps(script))
            env["ACP_AGENT_OFFLINE_SCRIPT"] = str(path)
        return AgentProcess(checker, "--state-dir", state_dir, *args, env=env)

    return make_agent


def log_path(state_dir: str, sid: str) -> Path:
    return Path(state_dir) / "sessions" / f"{sid}.jsonl"


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


async def run_turn(
    agent: AgentProcess, sid: str, text: str, transcript: list[dict[str, Any]]
) -> Any:
    """Prompt and add what the user saw to ``transcript`` (their prompt, then the updates)."""
    start = len(agent.updates_of(sid))
    result = await agent.prompt(sid, text)
    transcript.append({"sessionUpdate": "user_message_chunk", "content": text_block(text)})
    transcript.extend(agent.updates_of(sid)[start:])
    return result


def materialize(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold updates the way a client shows them: chunks joined per message, a tool call
    with its updates merged in, state updates dropped."""
    out: list[dict[str, Any]] = []
    calls: dict[str, int] = {}
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in STATE_KINDS:
            continue
        if kind in CHUNK_KINDS:
            u = {
                k: v
                for k, v in u.items()
                if not (kind == "user_message_chunk" and k == "messageId")
            }
            last = out[-1] if out else None
            if (
                last
                and last["sessionUpdate"] == kind
                and last.get("messageId") == u.get("messageId")
            ):
                text = last["content"]["text"] + u["content"]["text"]
                out[-1] = {**last, "content": {"type": "text", "text": text}}
                continue
        if kind == "tool_call_update" and u["toolCallId"] in calls:
            i = calls[u["toolCallId"]]
            out[i] = {**out[i], **{k: v for k, v in u.items() if k != "sessionUpdate"}}
            continue
        if kind == "tool_call":
            calls[u["toolCallId"]] = len(out)
        out.append(u)
    return out


async def load(
    agent: AgentProcess, sid: str, cwd: str, **params: Any
) -> tuple[Any, list[dict[str, Any]]]:
    """session/load; returns the result and the updates replayed before it."""
    start = len(agent.updates_of(sid))
    response = await agent.request_raw(
        "session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": [], **params}
    )
    if "error" in response:
        raise ResponseError(response["error"])
    index = agent.messages.index(response)
    before = [
        m["params"]["update"]
        for m in agent.messages[:index]
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
    ]
    return response["result"], before[start:]


async def mid_turn(
    agent: AgentProcess, workspace: str
) -> tuple[str, asyncio.Task[dict[str, Any]]]:
    """A new session whose prompt has started answering (its script must hang there):
    its id, and the task that gets the prompt's response."""
    sid = await agent.new_session(workspace)
    task = agent.start_request("session/prompt", {"sessionId": sid, "prompt": [text_block("go")]})
    await agent.wait_for(lambda: bool(agent.updates_of(sid, "agent_message_chunk")))
    return sid, task


async def started(agent: AgentProcess, **caps: Any) -> AgentProcess:
    """Initialize an agent that ``async with`` started."""
    await agent.initialize(caps or None)
    return agent


class TestCapabilities:
    async def test_everything_that_works_is_advertised(self, make: Make) -> None:
        async with make() as agent:
            caps = (await agent.initialize())["agentCapabilities"]
            assert caps["loadSession"] is True
            assert set(caps["sessionCapabilities"]) == {
                "list",
                "delete",
                "additionalDirectories",
                "fork",
                "resume",
                "close",
                "systemPrompt",
                "title",
                "status",
                "archive",
            }
            assert caps["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}


class TestLoad:
    async def test_round_trip_replays_what_the_user_saw(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """Turns with tools, a new process, session/load: the same updates, in the same
        order, with the same ids; then the conversation goes on and is kept too."""
        seen: list[dict[str, Any]] = []
        async with make(TOOL_TURN + PLAN_AND_COMMAND_TURN) as first:
            await started(first)
            sid = await first.new_session(workspace)
            result = await run_turn(first, sid, "what is in hello.txt?", seen)
            assert result["stopReason"] == "end_turn"
            await first.request("session/set_mode", {"sessionId": sid, "modeId": "bypass"})
            await run_turn(first, sid, "now run a command\nwith a plan", seen)
            (info,) = first.updates_of(sid, "session_info_update")
            assert info["title"] == "what is in hello.txt?" and info["updatedAt"].endswith("Z")

        async with make(TOOL_TURN) as second:
            await started(second)
            result, replayed = await load(second, sid, workspace)
            assert result["modes"]["currentModeId"] == "bypass"  # restored
            assert materialize(replayed) == materialize(seen)
            # one update per message and per tool call, each with its original id
            kinds = [u["sessionUpdate"] for u in replayed]
            assert kinds.count("tool_call") == 3 and "tool_call_update" not in kinds
            assert kinds.count("plan") == 1
            assert all(u.get("messageId") for u in replayed if u["sessionUpdate"] in CHUNK_KINDS)
            assert replayed[-1] == {
                "sessionUpdate": "session_info_update",
                **{k: info[k] for k in ("title", "updatedAt")},
            }
            # after the response: the commands and the usage figures, nothing else
            await second.wait_for(lambda: bool(second.updates_of(sid, "usage_update")))
            after = second.updates_of(sid)[len(replayed) :]
            assert [u["sessionUpdate"] for u in after] == [
                "available_commands_update",
                "usage_update",
            ]
            assert after[1]["used"] > 0
            old_ids = {u.get("messageId") for u in replayed} | {
                u.get("toolCallId") for u in replayed
            }
            start = len(second.updates_of(sid))
            await run_turn(second, sid, "and then?", seen)
            new = second.updates_of(sid)[start:]
            (call,) = [u for u in new if u["sessionUpdate"] == "tool_call"]
            assert call["toolCallId"] == "call_4"  # ids go on where the first process left off
            new_ids = {u.get("messageId") for u in new if u.get("messageId")}
            assert new_ids and not new_ids & old_ids

        async with make() as third:
            await started(third)
            _, replayed = await load(third, sid, workspace)
            assert materialize(replayed) == materialize(seen)

    async def test_loading_is_read_only(self, make: Make, workspace: str, state_dir: str) -> None:
        async with make(TOOL_TURN) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await first.prompt(sid, "read it")
        before = log_path(state_dir, sid).read_bytes()
        meta = (Path(state_dir) / "sessions" / f"{sid}.meta.json").read_bytes()
        async with make() as agent:
            await started(agent)
            for _ in range(2):
                await load(agent, sid, workspace)
                await agent.request("session/close", {"sessionId": sid})
        assert log_path(state_dir, sid).read_bytes() == before
        assert (Path(state_dir) / "sessions" / f"{sid}.meta.json").read_bytes() == meta

    async def test_the_model_sees_the_restored_history(
        self, checker: SchemaChecker, state_dir: str, workspace: str
    ) -> None:
        """After a restart the model gets the earlier turns, tool results included."""
        async with FakeLLMServer() as server:
            server.enqueue(
                Reply(
                    [
                        ToolCall("call_a", "read_file", json.dumps({"path": "hello.txt"})),
                        Usage(50, 5),
                        Finish("tool_calls"),
                    ]
                ),
                Reply([Text("It says hello."), Usage(80, 5), Finish("stop")]),
                Reply([Text("You asked about hello.txt."), Usage(90, 5), Finish("stop")]),
            )

            def agent() -> AgentProcess:
                return AgentProcess(
                    checker,
                    "--state-dir",
                    state_dir,
                    "--model",
                    "openai:gpt-4.1",
                    "--base-url",
                    server.openai_url,
                    env={"OPENAI_API_KEY": "test-key"},
                )

            async with agent() as first:
                await started(first)
                sid = await first.new_session(workspace)
                await first.prompt(sid, "what is in hello.txt?")
            async with agent() as second:
                await started(second)
                await load(second, sid, workspace)
                assert (await second.prompt(sid, "what did I ask?"))["stopReason"] == "end_turn"
            messages = server.requests[-1].body["messages"]
            roles = [m["role"] for m in messages]
            assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
            assert messages[1]["content"] == "what is in hello.txt?"
            assert messages[3]["tool_call_id"] == "call_a" and "hello" in messages[3]["content"]
            assert messages[4]["content"] == "It says hello."

    async def test_load_of_a_session_open_in_this_process(self, make: Make, workspace: str) -> None:
        """Loading a session this process holds replays it as well (nothing is lost)."""
        seen: list[dict[str, Any]] = []
        async with make(TOOL_TURN) as agent:
            await started(agent)
            sid = await agent.new_session(workspace)
            await run_turn(agent, sid, "read it", seen)
            _, replayed = await load(agent, sid, workspace)
            assert materialize(replayed) == materialize(seen)


class TestCrashes:
    async def test_sigkill_between_turns(self, make: Make, workspace: str, state_dir: str) -> None:
        seen: list[dict[str, Any]] = []
        async with make(TOOL_TURN) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await run_turn(first, sid, "read it", seen)
            first.kill()
        async with make([[{"text": "still here"}]]) as second:
            await started(second)
            _, replayed = await load(second, sid, workspace)
            assert materialize(replayed) == materialize(seen)
            await run_turn(second, sid, "go on", seen)
        async with make() as third:
            await started(third)
            _, replayed = await load(third, sid, workspace)
            assert materialize(replayed) == materialize(seen)

    async def test_sigkill_mid_turn(self, make: Make, workspace: str, state_dir: str) -> None:
        """Killed while the model streams: what came before replays identically, the
        interrupted turn up to its last flushed chunk; the log stays appendable."""
        seen: list[dict[str, Any]] = []
        script = [
            *TOOL_TURN,
            [{"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}}],
            [{"text": "partial words before the crash"}, {"hang": True}],
        ]
        async with make(script) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await run_turn(first, sid, "read it", seen)
            start = len(first.updates_of(sid))
            first.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [text_block("again")]}
            )
            await first.wait_for(lambda: "crash" in json.dumps(first.updates_of(sid)[-1:]))
            # chunks are flushed every 100 ms while streaming
            await eventually(lambda: b"crash" in log_path(state_dir, sid).read_bytes(),
                             "the chunk is in the session log")
            first.kill()
        interrupted = first.updates_of(sid)[start:]  # all it wrote: the pipe read to its end

        async with make([[{"text": "recovered"}]]) as second:
            await started(second)
            _, replayed = await load(second, sid, workspace)
            done = materialize(seen)
            assert materialize(replayed)[: len(done)] == done
            rest = materialize(replayed)[len(done) :]
            assert rest[0]["content"]["text"] == "again"
            assert materialize(interrupted) == rest[1:]
            assert rest[-1]["content"]["text"] == "partial words before the crash"
            seen = [*replayed]
            await run_turn(second, sid, "are you there?", seen)
        async with make() as third:
            await started(third)
            _, replayed = await load(third, sid, workspace)
            assert materialize(replayed) == materialize(seen)
            assert materialize(replayed)[-1]["content"]["text"] == "recovered"

    async def test_sigkill_during_a_tool_call(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """A tool call cut off by the crash is replayed as failed, and the conversation
        continues (the model's history gets a result for it)."""
        pid_file = Path(workspace) / "pid"
        command = f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; sleep 60"
        script = [[{"tool_call": {"name": "run_command", "arguments": {"command": command}}}]]
        async with make(script, "--mode", "bypass") as first:
            await started(first)
            sid = await first.new_session(workspace)
            first.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [text_block("sleep")]}
            )
            await eventually(pid_file.exists, "the command runs")
            await eventually(lambda: b'"tool_call"' in log_path(state_dir, sid).read_bytes(),
                             "the call is in the session log")  # its writer's own pace
            first.kill()
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)  # the agent could not
        async with make([[{"text": "ok"}]]) as second:
            await started(second)
            _, replayed = await load(second, sid, workspace)
            (call,) = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
            assert call["status"] == "failed" and call["toolCallId"] == "call_1"
            assert (await second.prompt(sid, "again"))["stopReason"] == "end_turn"

    async def test_a_corrupt_tail_is_skipped(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        seen: list[dict[str, Any]] = []
        async with make(TOOL_TURN) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await run_turn(first, sid, "read it", seen)
        path = log_path(state_dir, sid)
        whole = path.read_bytes()
        with path.open("ab") as fh:
            fh.write(b"\x00\xffgarbage\n" + whole.splitlines(keepends=True)[-3][:40])  # half a line
        async with make([[{"text": "fine"}]]) as second:
            await started(second)
            _, replayed = await load(second, sid, workspace)
            assert materialize(replayed) == materialize(seen)
            await run_turn(second, sid, "still works?", seen)
        async with make() as third:
            await started(third)
            _, replayed = await load(third, sid, workspace)
            assert materialize(replayed) == materialize(seen)
        assert path.read_bytes().startswith(whole)  # never rewritten


class TestSharedStateDir:
    async def test_two_processes_write_different_sessions(self, make: Make, workspace: str) -> None:
        words = " ".join(f"w{i}" for i in range(60))
        script = [[{"thinking": words}, {"text": words}]] * 4
        seen: dict[str, list[dict[str, Any]]] = {}
        async with make(script) as a, make(script) as b:
            await started(a)
            await started(b)
            sa, sb = await a.new_session(workspace), await b.new_session(workspace)
            seen = {sa: [], sb: []}

            async def talk(agent: AgentProcess, sid: str) -> None:
                for i in range(4):
                    await run_turn(agent, sid, f"turn {i}", seen[sid])

            await asyncio.gather(talk(a, sa), talk(b, sb))
        async with make() as c:
            await started(c)
            for sid in (sa, sb):
                _, replayed = await load(c, sid, workspace)
                assert materialize(replayed) == materialize(seen[sid])
            listed = (await c.request("session/list", {}))["sessions"]
            assert {s["sessionId"] for s in listed} == {sa, sb}

    async def test_a_session_owned_elsewhere_is_read_only(self, make: Make, workspace: str) -> None:
        """Another process can list and load a session in use; prompting it is a clear
        error until its owner lets go."""
        seen: list[dict[str, Any]] = []
        async with make(TOOL_TURN) as owner, make([[{"text": "mine now"}]]) as other:
            await started(owner)
            await started(other)
            sid = await owner.new_session(workspace)
            await run_turn(owner, sid, "read it", seen)
            assert [
                s["sessionId"] for s in (await other.request("session/list", {}))["sessions"]
            ] == [sid]
            _, replayed = await load(other, sid, workspace)
            assert materialize(replayed) == materialize(seen)
            response = await other.request_raw(
                "session/prompt", {"sessionId": sid, "prompt": [text_block("hi")]}
            )
            assert response["error"]["code"] == -32600
            assert "another" in response["error"]["message"]
            assert response["error"]["data"] == {"sessionId": sid}
            await owner.request("session/close", {"sessionId": sid})
            await run_turn(other, sid, "hi", seen)
        async with make() as third:
            await started(third)
            _, replayed = await load(third, sid, workspace)
            assert materialize(replayed) == materialize(seen)


class TestList:
    async def test_empty(self, make: Make) -> None:
        async with make() as agent:
            await started(agent)
            assert await agent.request("session/list", {}) == {"sessions": []}
            assert await agent.request("session/list") == {"sessions": []}  # no params at all

    async def test_pagination_newest_first_with_a_cwd_filter(
        self, make: Make, state_dir: str
    ) -> None:
        from acp_agent.sessions.records import Header
        from acp_agent.sessions.store import Store

        store = Store(state_dir)
        for i in range(300):
            stamp = f"2025-01-01T0{i // 60}:{i % 60:02d}:00.000Z"
            header = Header(
                id=f"sess_{i:04d}",
                cwd="/a" if i % 3 else "/b",
                created_at=stamp,
                additional_directories=["/lib"] if i == 7 else [],
            )
            writer = store.create(header)
            writer.touch(updated_at=stamp, title=f"session {i}")
            writer.close()
        store.writer.close()  # on disk before the agent process lists them
        async with make() as agent:
            await started(agent)
            pages, cursor = [], None
            while True:
                result = await agent.request("session/list", {"cursor": cursor} if cursor else {})
                pages.append(result["sessions"])
                cursor = result.get("nextCursor")
                if cursor is None:
                    break
            assert [len(p) for p in pages] == [50] * 6
            ids = [s["sessionId"] for p in pages for s in p]
            assert ids == [f"sess_{i:04d}" for i in reversed(range(300))]
            first = pages[0][0]
            assert first == {
                "sessionId": "sess_0299",
                "cwd": "/a",
                "title": "session 299",
                "updatedAt": "2025-01-01T04:59:00.000Z",
                "archived": False,
            }
            assert pages[-1][-8]["additionalDirectories"] == ["/lib"]
            only_b = await agent.request("session/list", {"cwd": "/b"})
            assert len(only_b["sessions"]) == 50 and all(
                s["cwd"] == "/b" for s in only_b["sessions"]
            )
            rest = await agent.request(
                "session/list", {"cwd": "/b", "cursor": only_b["nextCursor"]}
            )
            assert len(rest["sessions"]) == 50 and "nextCursor" not in rest
            assert (await agent.request("session/list", {"cwd": "/nowhere"})) == {"sessions": []}
            for bad in ("nonsense!", "e30", ""):
                response = await agent.request_raw("session/list", {"cursor": bad})
                assert response["error"]["code"] == -32602, bad

    async def test_titles_show_in_the_list(self, make: Make, workspace: str) -> None:
        long = "Please   refactor the session store so that it " + "x" * 80 + "\nsecond line"
        async with make([[{"text": "ok"}], [{"text": "ok"}]]) as agent:
            await started(agent)
            sid = await agent.new_session(workspace)
            listed = (await agent.request("session/list", {"cwd": workspace}))["sessions"]
            assert listed == [{"sessionId": sid, "cwd": workspace,
                               "updatedAt": listed[0]["updatedAt"], "archived": False}]
            await agent.prompt(sid, long)
            (info,) = agent.updates_of(sid, "session_info_update")
            assert info["title"] == "Please refactor the session store so that it…"
            await agent.prompt(sid, "another")
            assert len(agent.updates_of(sid, "session_info_update")) == 1  # named once
            (entry,) = (await agent.request("session/list", {"cwd": workspace}))["sessions"]
            assert entry["title"] == info["title"] and entry["updatedAt"] >= info["updatedAt"]


class TestResumeForkDelete:
    async def test_resume_restores_without_replay(self, make: Make, workspace: str) -> None:
        seen: list[dict[str, Any]] = []
        async with make(TOOL_TURN) as first:
            await started(first)
            sid = await first.new_session(workspace)
            await run_turn(first, sid, "read it", seen)
        async with make([[{"text": "resumed"}]]) as second:
            await started(second)
            _, before = await load_like(second, "session/resume", sid, workspace)
            assert before == []
            await second.wait_for(lambda: bool(second.updates_of(sid, "usage_update")))
            await run_turn(second, sid, "go on", seen)
        async with make() as third:
            await started(third)
            _, replayed = await load(third, sid, workspace)
            assert materialize(replayed) == materialize(seen)

    async def test_fork_copies_and_stays_independent(self, make: Make, workspace: str) -> None:
        source_seen: list[dict[str, Any]] = []
        async with make(
            [*TOOL_TURN, [{"text": "in the fork"}], [{"text": "in the source"}]]
        ) as agent:
            await started(agent)
            sid = await agent.new_session(workspace)
            await run_turn(agent, sid, "read it", source_seen)
            result = await agent.request(
                "session/fork", {"sessionId": sid, "cwd": workspace, "mcpServers": []}
            )
            fork = result["sessionId"]
            assert fork != sid and result["modes"]["currentModeId"] == "ask"
            fork_seen = list(source_seen)
            await run_turn(agent, fork, "summarize", fork_seen)
            await run_turn(agent, sid, "continue", source_seen)
            listed = {
                s["sessionId"]: s for s in (await agent.request("session/list", {}))["sessions"]
            }
            assert listed[fork]["title"] == listed[sid]["title"] == "read it"
        async with make() as other:
            await started(other)
            _, replayed = await load(other, sid, workspace)
            assert materialize(replayed) == materialize(source_seen)
            _, replayed = await load(other, fork, workspace)
            assert materialize(replayed) == materialize(fork_seen)

    async def test_delete(self, make: Make, workspace: str, state_dir: str) -> None:
        """Delete cancels a running turn, removes the session from the list and the disk,
        and is idempotent."""
        async with make([[{"text": "start "}, {"hang": True}]]) as agent:
            await started(agent)
            keep = await agent.new_session(workspace)
            sid, task = await mid_turn(agent, workspace)
            assert await agent.request("session/delete", {"sessionId": sid}) == {}
            assert (await task)["result"]["stopReason"] == "cancelled"
            listed = (await agent.request("session/list", {}))["sessions"]
            assert [s["sessionId"] for s in listed] == [keep]
            files = os.listdir(Path(state_dir) / "sessions")
            assert f"{keep}.jsonl" in files and not [f for f in files if sid in f]
            for again in (sid, "sess_never_existed", "../../etc/passwd"):
                assert await agent.request("session/delete", {"sessionId": again}) == {}
            response = await agent.request_raw(
                "session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []}
            )
            assert response["error"]["code"] == -32002


async def load_like(
    agent: AgentProcess, method: str, sid: str, cwd: str
) -> tuple[Any, list[dict[str, Any]]]:
    """A lifecycle request; returns the result and the updates sent before it."""
    response = await agent.request_raw(method, {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    if "error" in response:
        raise ResponseError(response["error"])
    index = agent.messages.index(response)
    return response["result"], [
        m
        for m in agent.messages[:index]
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
    ]


class TestValidation:
    async def test_bad_additional_directories(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """Rejected with -32602 on every lifecycle method, before anything is created."""
        async with make([[{"text": "ok"}]]) as agent:
            await started(agent)
            sid = await agent.new_session(workspace)
            await agent.prompt(sid, "x")
            await agent.request("session/close", {"sessionId": sid})
            files = sorted(os.listdir(Path(state_dir) / "sessions"))
            for bad in (["relative/dir"], [""], [1], "/not/a/list", [None], [workspace, "x"]):
                base = {"cwd": workspace, "mcpServers": [], "additionalDirectories": bad}
                for method, extra in [
                    ("session/new", {}),
                    ("session/load", {"sessionId": sid}),
                    ("session/resume", {"sessionId": sid}),
                    ("session/fork", {"sessionId": sid}),
                ]:
                    response = await agent.request_raw(method, {**base, **extra})
                    assert response["error"]["code"] == -32602, (method, bad)
            assert sorted(os.listdir(Path(state_dir) / "sessions")) == files
            response = await agent.request_raw("session/prompt", {"sessionId": sid, "prompt": []})
            assert response["error"]["code"] == -32002  # nothing was loaded

    async def test_additional_directories_are_kept_and_replaced(
        self, make: Make, workspace: str, tmp_path: Path
    ) -> None:
        lib, docs = str(tmp_path / "lib"), str(tmp_path / "docs")
        async with make([[{"text": "ok"}]]) as first:
            await started(first)
            sid = await first.new_session(workspace, additionalDirectories=[lib])
            (entry,) = (await first.request("session/list", {}))["sessions"]
            assert entry["additionalDirectories"] == [lib]
        async with make([[{"text": "ok"}]]) as second:
            await started(second)
            await load(second, sid, workspace, additionalDirectories=[docs])
            await second.prompt(sid, "x")  # the new complete list is kept once used
            (entry,) = (await second.request("session/list", {}))["sessions"]
            assert entry["additionalDirectories"] == [docs]
            await second.request("session/close", {"sessionId": sid})
            await load(second, sid, workspace)  # omitted: no additional roots
            await second.prompt(sid, "y")
            (entry,) = (await second.request("session/list", {}))["sessions"]
            assert "additionalDirectories" not in entry

    async def test_unknown_sessions(self, make: Make, workspace: str) -> None:
        async with make() as agent:
            await started(agent)
            for method in ("session/load", "session/resume", "session/fork"):
                for sid in ("sess_nope", "../sessions/x", ""):
                    response = await agent.request_raw(
                        method, {"sessionId": sid, "cwd": workspace, "mcpServers": []}
                    )
                    assert response["error"]["code"] == -32002, (method, sid)
                    assert response["error"]["data"] == {"sessionId": sid}
            await agent.notify("session/cancel", {"sessionId": "sess_nope"})  # ignored
            assert (await agent.request("session/list", {})) == {"sessions": []}


class TestReplayAcrossCapabilities:
    SCRIPT: ClassVar[Script] = [
        [{"tool_call": {"name": "write_plan", "arguments": {"content": "# Plan\n- [ ] one"}}}],
        [{"text": "planned"}],
        [{"text": "SUMMARY of it all"}],  # the /compact summary
    ]
    RICH: ClassVar[dict[str, Any]] = {
        "session": {"compaction": {}, "notices": {}}, "plan": {}, "subagents": {}}

    async def test_recorded_rich_loaded_plain_and_the_reverse(
        self, make: Make, workspace: str, state_dir: str
    ) -> None:
        """A session recorded by a client with every capability replays, to a client
        with none, each event in its fallback form (a plan document as the classic plan,
        the compaction as its message); the reverse keeps what was recorded."""
        async with make(self.SCRIPT) as rich:
            await rich.initialize(self.RICH)
            sid = await rich.new_session(workspace)
            await rich.prompt(sid, "plan it")
            await rich.prompt(sid, "/compact")
            assert rich.updates_of(sid, "plan_update") and rich.updates_of(sid, "compaction_update")
        async with make() as plain:
            await plain.initialize({})
            _, replayed = await load(plain, sid, workspace)  # every line checked by the schema
            kinds = [u["sessionUpdate"] for u in replayed]
            assert "plan_update" not in kinds and "compaction_update" not in kinds
            (plan,) = [u for u in replayed if u["sessionUpdate"] == "plan"]
            one = {"content": "one", "priority": "medium", "status": "pending"}
            assert plan["entries"] == [one]
            said = "".join(u["content"]["text"] for u in replayed
                           if u["sessionUpdate"] == "agent_message_chunk")  # fmt: skip
            assert "compacted into this summary" in said and "SUMMARY of it all" in said
        other = await self._recorded_plain(make, workspace)
        async with make() as rich_again:
            await rich_again.initialize(self.RICH)
            _, replayed = await load(rich_again, other, workspace)
            kinds = [u["sessionUpdate"] for u in replayed]
            assert "plan" in kinds and "plan_update" not in kinds  # as it was shown live
            assert "compaction_update" not in kinds

    async def _recorded_plain(self, make: Make, workspace: str) -> str:
        async with make(self.SCRIPT) as plain:
            await plain.initialize({})
            sid = await plain.new_session(workspace)
            await plain.prompt(sid, "plan it")
            await plain.prompt(sid, "/compact")
            return str(sid)
