"""The human mode (run/chat) on the project's own connection and typed wire messages.

The renderer is fed typed updates decoded from the JSON the agent sends; the client is
driven in-process against a fake agent on a second :class:`Connection`; the error and
Ctrl-C paths run the real command.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_agent.errors import RemoteError
from acp_agent.human import HumanClient, Keyboard, Renderer, Spinner, block_text
from acp_agent.protocol import types as t
from acp_agent.rpc.connection import Connection, ConnectionClosed, Route
from acp_agent.rpc.framing import LineReader, MemoryPipe, open_child

from .harness import agent_env

# --------------------------------------------------------------------------- renderer


def render(*updates: dict[str, Any], result: dict[str, Any] | None = None) -> str:
    """Decode each update from its wire form, as the client does, and render it."""
    out = io.StringIO()
    r = Renderer(out)
    dec = msgspec.json.Decoder(t.SessionNotification)
    for u in updates:
        r.update(dec.decode(json.dumps({"sessionId": "s", "update": u})).update)
    if result is not None:
        r.finish(msgspec.json.decode(json.dumps(result), type=t.PromptResponse))
    return out.getvalue()


def chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_text_and_thoughts_stream_each_on_its_own_line() -> None:
    out = render(chunk("agent_thought_chunk", "hmm "), chunk("agent_thought_chunk", "ok"),
                 chunk("agent_message_chunk", "Hello "), chunk("agent_message_chunk", "there"),
                 result={"stopReason": "end_turn"})
    assert out == "hmm ok\nHello there\n— stop: end_turn\n"


def test_plan_notice_and_footer() -> None:
    out = render(
        {"sessionUpdate": "plan", "entries": [
            {"content": "one", "priority": "high", "status": "completed"},
            {"content": "two", "priority": "low", "status": "in_progress"},
            {"content": "three", "priority": "low", "status": "pending"}]},
        {"sessionUpdate": "notice", "severity": "warning", "title": "Slow",
         "description": "retrying"},
        {"sessionUpdate": "notice", "severity": "info", "title": "Bare"},
        {"sessionUpdate": "usage_update", "used": 10, "size": 100,
         "cost": {"amount": 0.5, "currency": "USD"}},
        {"sessionUpdate": "available_commands_update", "availableCommands": []},  # not shown
        result={"stopReason": "max_tokens",
                "usage": {"totalTokens": 7, "inputTokens": 5, "outputTokens": 2}})
    assert out == (
        "Plan\n  [x] one\n  [~] two\n  [ ] three\n"
        "! Slow: retrying\n! Bare\n"
        "— stop: max_tokens · tokens: 5 in / 2 out · context: 10/100 · cost: 0.5000 USD\n"
    )


def test_a_tool_call_is_printed_once_when_done_with_its_content() -> None:
    out = render(
        chunk("agent_message_chunk", "Let me write."),
        {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Write a.txt",
         "kind": "edit", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
         "title": None},  # null never erases what was known
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
         "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "x\n", "newText": "y\n"},
                     {"type": "content", "content": {"type": "text", "text": "done\nok\n"}},
                     {"type": "terminal", "terminalId": "t9"}]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"},
    )
    assert out == (
        "Let me write.\n✓ Write a.txt\n"
        "--- a/w/a.txt\n+++ b/w/a.txt\n@@ -1 +1 @@\n-x\n+y\n"
        "  done\n  ok\n  [terminal t9]\n"
    )


def test_tool_call_titles_failures_and_thinking() -> None:
    think = {"type": "content", "content": {"type": "text", "text": "the plan"}}
    out = render(
        {"sessionUpdate": "tool_call_update", "toolCallId": "a", "name": "grep",
         "status": "failed"},  # an update for a call never announced: named by its name
        {"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "completed"},
        {"sessionUpdate": "tool_call", "toolCallId": "p", "title": "Update plan", "kind": "think",
         "status": "completed", "content": [think]},  # a plan is shown as a plan
        {"sessionUpdate": "tool_call", "toolCallId": "q", "title": "Think", "kind": "think",
         "status": "failed", "content": [think]},
        {"sessionUpdate": "tool_call", "toolCallId": "n", "title": "New file",
         "status": "completed", "content": [{"type": "diff", "path": "n.txt", "newText": "hi\n"}]},
    )
    assert out == (
        "✗ grep\n✓ tool\n✓ Update plan\n✗ Think\n  the plan\n"
        "✓ New file\n--- an.txt\n+++ bn.txt\n@@ -0,0 +1 @@\n+hi\n"
    )


def test_other_content_blocks_are_named() -> None:
    assert block_text(t.ResourceLink(name="a.py", uri="file:///a.py")) == "[a.py](file:///a.py)"
    assert block_text(t.ImageContent(data="", mime_type="image/png")) == "[image]"
    resource = t.EmbeddedResource(resource=t.EmbeddedResourceResourceAny(uri="file:///x", text="x"))
    assert block_text(resource) == "[resource]"


# --------------------------------------------------------------------------- spinner


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_the_spinner_draws_only_at_line_start_and_never_while_held() -> None:
    err = FakeTTY()
    at_start = True
    spinner = Spinner(err, lambda: at_start)
    spinner.start()
    await asyncio.sleep(0.15)
    assert "working…" in err.getvalue() and spinner.shown
    with spinner.held():
        assert err.getvalue().endswith("\r\x1b[K") and not spinner.shown
        mark = len(err.getvalue())
        await asyncio.sleep(0.35)
        assert len(err.getvalue()) == mark
    at_start = False  # streamed text: no spinner over it
    await asyncio.sleep(0.25)
    assert len(err.getvalue()) == mark
    at_start = True
    await asyncio.sleep(0.15)
    assert "working…" in err.getvalue()[mark:]
    spinner.stop()
    assert err.getvalue().endswith("\r\x1b[K")


def test_no_spinner_when_stderr_is_not_a_terminal() -> None:
    spinner = Spinner(io.StringIO(), lambda: True)
    spinner.start()  # no running loop needed: nothing is started
    assert spinner._task is None


# --------------------------------------------------------------------------- client


class Stdin(io.StringIO):
    """A keyboard: ``readline`` (in Keyboard's thread) calls ``typed`` for each line."""

    def __init__(self, typed: Callable[[], str], tty: bool = True) -> None:
        super().__init__()
        self.typed = typed
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        return self.typed()


Turn = Callable[[Connection, t.PromptRequest], Awaitable[t.PromptResponse]]


class Pair:
    """A HumanClient and a fake agent, connected in memory."""

    def __init__(self, turn: Turn, *, yes: bool = False, stdin: Stdin | None = None) -> None:
        to_agent, to_client = LineReader(), LineReader()
        self.out, self.err = io.StringIO(), FakeTTY()
        self.client = HumanClient(
            to_client, MemoryPipe(to_agent), Renderer(self.out), yes=yes,
            keyboard=Keyboard(stdin or Stdin(lambda: "", tty=False)), err=self.err)
        self.agent_writer = MemoryPipe(to_client)
        self.agent = Connection(to_agent, self.agent_writer)
        self.cancelled = asyncio.Event()

        async def initialize(_: t.InitializeRequest) -> t.InitializeResponse:
            return t.InitializeResponse(
                protocol_version=1, auth_methods=[t.AuthMethodAgent(id="x", name="X")])

        async def new(req: t.NewSessionRequest) -> t.NewSessionResponse:
            return t.NewSessionResponse(session_id="s1")

        async def cancel(_: t.CancelNotification) -> None:
            self.cancelled.set()

        self.agent.routes.update({
            "initialize": Route(t.InitializeRequest, initialize),
            "session/new": Route(t.NewSessionRequest, new),
            "session/prompt": Route(t.PromptRequest, lambda req: turn(self.agent, req)),
            "session/cancel": Route(t.CancelNotification, cancel, notification=True),
        })
        self.serving = asyncio.create_task(self._serve_agent())

    async def _serve_agent(self) -> None:
        await self.agent.serve()
        await self.agent.close()
        await self.agent_writer.aclose()

    async def session(self) -> str:
        await self.client.initialize()
        return await self.client.new_session("/w")

    async def close(self) -> None:
        await asyncio.wait_for(self.client.close(), 5)
        await self.serving


def ask(conn: Connection, title: str = "Run `ls`") -> Awaitable[t.RequestPermissionResponse]:
    options = [t.PermissionOption(option_id=k, name=k, kind=k)
               for k in ("allow_once", "allow_always", "reject_once", "reject_always")]
    return conn.request(
        "session/request_permission",
        t.RequestPermissionRequest(session_id="s1", options=options,
                                   tool_call=t.ToolCallUpdate(tool_call_id="c", title=title)),
        t.RequestPermissionResponse)


def chosen(response: t.RequestPermissionResponse) -> str:
    assert isinstance(response.outcome, t.SelectedPermissionOutcome)
    return response.outcome.option_id


async def test_a_turn_over_the_connection() -> None:
    seen: list[Any] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        seen.append(req.prompt)
        await conn.notify("session/update", t.SessionNotification(
            session_id="s1", update=t.AgentMessageChunk(content=t.TextContent(text="Hi"))))
        seen.append(chosen(await ask(conn)))
        try:  # not advertised, no route: method not found
            await conn.request("fs/read_text_file",
                               t.ReadTextFileRequest(session_id="s1", path="/a"),
                               t.ReadTextFileResponse)
        except RemoteError as exc:
            seen.append(exc.code)
        return t.PromptResponse(stop_reason="end_turn", usage=t.Usage(
            total_tokens=3, input_tokens=2, output_tokens=1))

    pair = Pair(turn, yes=True)
    sid = await pair.session()
    result = await pair.client.prompt(sid, "hello")
    await pair.close()
    assert result.stop_reason == "end_turn"
    assert seen == [[t.TextContent(text="hello")], "allow_once", -32601]
    assert pair.out.getvalue() == "Hi\n— stop: end_turn · tokens: 2 in / 1 out\n"


async def test_without_a_terminal_tool_calls_are_rejected() -> None:
    answers: list[str] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        answers.append(chosen(await ask(conn)))
        return t.PromptResponse(stop_reason="end_turn")

    pair = Pair(turn)
    await pair.client.prompt(await pair.session(), "go")
    await pair.close()
    assert answers == ["reject_once"]


async def test_the_spinner_is_never_drawn_over_a_question() -> None:
    answers: list[str] = []

    def typed() -> str:  # the person takes their time, then answers "A"
        threading.Event().wait(0.4)
        pair.err.write("<answered>")
        return "A\n"

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        await asyncio.sleep(0.25)  # the model works: the spinner spins
        answers.append(chosen(await ask(conn)))
        await asyncio.sleep(0.25)
        return t.PromptResponse(stop_reason="end_turn")

    pair = Pair(turn, stdin=Stdin(typed))
    await pair.client.prompt(await pair.session(), "go")
    await pair.close()
    assert answers == ["allow_always"]
    err = pair.err.getvalue()
    before, question = err.split("\nAllow Run `ls`? ")
    assert "working…" in before and before.endswith("\r\x1b[K")  # cleared before asking
    asking, after = question.split("<answered>")
    assert "working…" not in asking  # ...and not drawn until the answer was in
    assert "working…" in after  # then the turn goes on, and so does the spinner


async def test_a_withdrawn_question_keeps_the_typed_line_for_the_next_reader() -> None:
    line = threading.Event()
    results: list[Any] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        asking = asyncio.ensure_future(ask(conn))
        await asyncio.sleep(0.1)
        asking.cancel()  # the turn was cancelled: $/cancel_request
        try:
            await asking
        except asyncio.CancelledError:
            results.append("withdrawn")
        return t.PromptResponse(stop_reason="cancelled")

    def typed() -> str:
        line.wait(5)
        return "next prompt\n"

    pair = Pair(turn, stdin=Stdin(typed))
    result = await pair.client.prompt(await pair.session(), "go")
    assert result.stop_reason == "cancelled" and results == ["withdrawn"]
    line.set()
    assert await asyncio.wait_for(pair.client.keyboard.readline(), 5) == "next prompt\n"
    await pair.close()


async def test_ctrl_c_sends_session_cancel() -> None:
    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        await pair.cancelled.wait()
        return t.PromptResponse(stop_reason="cancelled")

    pair = Pair(turn)
    sid = await pair.session()
    prompting = asyncio.create_task(pair.client.prompt(sid, "go"))
    await asyncio.sleep(0.05)
    pair.client.cancel_soon(sid)
    assert (await asyncio.wait_for(prompting, 5)).stop_reason == "cancelled"
    await pair.close()


async def test_when_the_agent_goes_away_waiting_requests_fail() -> None:
    started = asyncio.Event()

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        started.set()
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    pair = Pair(turn)
    sid = await pair.session()
    prompting = asyncio.create_task(pair.client.prompt(sid, "go"))
    await started.wait()
    await pair.agent_writer.aclose()  # the agent's stdout closes mid-turn
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(prompting, 2)
    with pytest.raises(ConnectionClosed):  # and so does anything asked later
        await asyncio.wait_for(pair.client.prompt(sid, "again"), 2)
    await pair.agent.close(grace=0)
    await pair.close()


async def test_requests_made_while_the_connection_closes_fail_at_once() -> None:
    reader = LineReader()
    handled = asyncio.Event()

    async def slow(_: Any) -> None:
        handled.set()
        await asyncio.sleep(30)

    conn = Connection(reader, MemoryPipe(LineReader()), {"slow": Route(dict, slow)})
    reader.feed(b'{"jsonrpc":"2.0","id":1,"method":"slow","params":{}}\n')
    reader.feed_eof()
    await conn.serve()
    await handled.wait()
    closing = asyncio.create_task(conn.close(grace=0.5))  # the handler gets its grace
    await asyncio.sleep(0)
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(conn.request("ping", {}, dict), 0.2)
    await closing


# --------------------------------------------------------------------------- framing


async def test_open_child_wires_a_subprocess_pipes() -> None:
    code = "import sys\nfor line in sys.stdin: sys.stdout.write(line.upper()); sys.stdout.flush()"
    proc, reader, writer = await open_child(sys.executable, "-c", code)
    writer.write_line(b'{"a": 1}\n')
    await writer.drain()
    assert await asyncio.wait_for(reader.readline(), 5) == b'{"A": 1}'
    await writer.aclose()  # the child's input ends, so it exits, so its output ends
    assert await asyncio.wait_for(proc.wait(), 5) == 0
    assert await asyncio.wait_for(reader.readline(), 5) is None


# --------------------------------------------------------------------------- the command


def acp(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "acp_agent", *args], text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=agent_env({"NO_COLOR": "1", **(env or {})}))


def test_agent_errors_end_in_one_line(state_dir: str, workspace: str, tmp_path: Path) -> None:
    where = ("--state-dir", state_dir, "--cwd", workspace)
    proc = acp("run", "hi", "--model", "openai:gpt-4.1", *where)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert err == "acp-agent: Authentication required: set OPENAI_API_KEY for openai:gpt-4.1\n"
    bad = tmp_path / "c.toml"
    bad.write_text('[limits]\nmax-turn-requests = "many"\n')
    proc = acp("run", "hi", "--config", str(bad), *where)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    lines = err.splitlines()  # the agent's own complaint, then ours; no traceback
    assert len(lines) == 2 and "limits.max-turn-requests" in lines[0]
    assert lines[1] == "acp-agent: the agent exited"


def test_ctrl_c_cancels_the_turn(state_dir: str, workspace: str, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([[{"text": "working on it "}, {"hang": True}]]))
    proc = acp("run", "go", "--state-dir", state_dir, "--cwd", workspace,
               env={"ACP_AGENT_OFFLINE_SCRIPT": str(script)})
    assert proc.stdout is not None
    first = proc.stdout.read(len("working on it "))
    os.kill(proc.pid, signal.SIGINT)  # the human process only, not the agent's group
    out, err = proc.communicate(timeout=30)
    assert (first + out).startswith("working on it \n— stop: cancelled"), err
    assert proc.returncode == 0
