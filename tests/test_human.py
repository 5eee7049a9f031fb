"""The human mode (run/chat) on the project's own connection and typed wire messages.

The views are fed typed updates decoded from the JSON the agent sends; the client is
driven in-process against a fake agent on a second :class:`Connection`, its keyboard a
pipe or a pseudo-terminal. tests/test_terminal.py runs the real command in a terminal.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
from rich.console import Console

from acp_agent.errors import RemoteError
from acp_agent.human import HumanClient, Keyboard, Renderer, Session, block_text
from acp_agent.human._render import JsonLines, question_choices
from acp_agent.human._rich import RichView, complete_blocks
from acp_agent.human.checks import Options
from acp_agent.human.client import Policy
from acp_agent.human.keyboard import Interrupted
from acp_agent.protocol import types as t
from acp_agent.rpc.connection import Connection, ConnectionClosed, Route
from acp_agent.rpc.framing import LineReader, MemoryPipe, open_child

from .limits import WAIT

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
                 result={"stopReason": "max_tokens"})
    assert out == "hmm ok\nHello there\n— stop: max_tokens\n"


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
        "--- /w/a.txt\n+++ /w/a.txt\n@@ -1 +1 @@\n-x\n+y\n"  # outside the session's directory
        "  done\n  ok\n  [terminal t9]\n"
    )


def test_a_diff_names_a_file_of_the_session_as_git_does() -> None:
    r = Renderer(io.StringIO())
    r.cwd = "/w"
    r.update(t.ToolCall(tool_call_id="c", title="Edit", status="completed", content=[
        t.Diff(path="/w/src/a.py", old_text="x\n", new_text="y\n"),
        t.Diff(path="/w/new.py", new_text="z\n")]))
    assert r.out.getvalue().splitlines()[1:3] + r.out.getvalue().splitlines()[6:8] == [  # type: ignore[attr-defined]
        "--- a/src/a.py", "+++ b/src/a.py", "--- /dev/null", "+++ b/new.py"]


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
        "✓ New file\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+hi\n"
    )


def test_other_content_blocks_are_named() -> None:
    assert block_text(t.ResourceLink(name="a.py", uri="file:///a.py")) == "[a.py](file:///a.py)"
    assert block_text(t.ImageContent(data="", mime_type="image/png")) == "[image]"
    resource = t.EmbeddedResource(resource=t.EmbeddedResourceResourceAny(uri="file:///x", text="x"))
    assert block_text(resource) == "[resource]"


def test_a_command_that_exits_non_zero_is_a_failure() -> None:
    def done(call_id: str, raw: dict[str, Any]) -> dict[str, Any]:
        return {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": f"Run {call_id}",
                "kind": "execute", "status": "completed", "rawOutput": raw}

    out = render(done("ok", {"exitCode": 0}), done("two", {"exitCode": 2}),
                 done("killed", {"exitCode": None, "signal": "SIGKILL"}))
    assert out == "✓ Run ok\n✗ Run two (exit 2)\n✗ Run killed (killed by SIGKILL)\n"


def test_the_footer_shows_this_turns_figures() -> None:
    """The context only when measured during the turn (an announced 0 is no measure), the
    turn's own cost (the session's beside it when they differ), nothing for an answer
    the agent gave by itself."""
    r = Renderer(io.StringIO())
    used = t.Usage(total_tokens=3, input_tokens=2, output_tokens=1)

    def usage(used: int, cost: float) -> t.UsageUpdate:
        return t.UsageUpdate(used=used, size=128000, cost=t.Cost(amount=cost, currency="USD"))

    r.begin_turn()
    r.update(usage(1608, 0.5))
    r.finish(t.PromptResponse(stop_reason="end_turn", usage=used))
    r.begin_turn()  # cancelled before the model answered: no new figure, no stale one
    r.update(usage(0, 0.5))  # as announced when a session opens
    r.finish(t.PromptResponse(stop_reason="cancelled"))
    r.begin_turn()
    r.update(usage(2000, 0.75))
    r.finish(t.PromptResponse(stop_reason="end_turn", usage=used))
    r.begin_turn()
    r.finish(t.PromptResponse(stop_reason="end_turn"))  # /help: no footer
    assert r.out.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "— stop: end_turn · tokens: 2 in / 1 out · context: 1,608/128,000 · cost: 0.5000 USD",
        "— stop: cancelled · cost: 0.0000 USD (session: 0.5000)",
        "— stop: end_turn · tokens: 2 in / 1 out · context: 2,000/128,000 · cost: 0.2500 USD"
        " (session: 0.7500)",
    ]


def test_json_lines_carry_the_updates_then_the_result() -> None:
    out = io.StringIO()
    view = JsonLines(out)
    view.session_id = "s1"
    view.update(t.AgentMessageChunk(content=t.TextContent(text="Hi")))
    view.finish(t.PromptResponse(stop_reason="end_turn"))
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
                                       "content": {"type": "text", "text": "Hi"}}},
        {"result": {"stopReason": "end_turn"}},
    ]


@pytest.mark.parametrize(("text", "whole"), [
    ("one line", ""),
    ("para one\n\npara tw", "para one\n\n"),
    ("a\n\n```py\nx = 1\n\ny = 2\n", "a\n\n"),  # no cut inside a code block
    ("```py\nx = 1\n```\nafter", "```py\nx = 1\n```\n"),
    ("````\n```\n````\n", "````\n```\n````\n"),  # a longer fence closes only itself
    ("~~~\na\n\n~~~\n\nb", "~~~\na\n\n~~~\n\n"),
])
def test_streamed_markdown_is_printed_a_whole_block_at_a_time(text: str, whole: str) -> None:
    assert text[:complete_blocks(text)] == whole


async def test_the_rich_view_renders_markdown_diffs_and_a_failed_command() -> None:
    console = Console(file=io.StringIO(), width=70, color_system=None)
    view = RichView(console)
    view.begin_turn()
    for piece in ("Some **bold** ", "words.\n\n```python\nprint(1)\n", "```\n\nDone."):
        view.update(t.AgentMessageChunk(content=t.TextContent(text=piece)))
    view.update(t.Plan(entries=[t.PlanEntry(content="look", priority="high",
                                            status="completed")]))
    view.update(t.ToolCall(tool_call_id="e", title="Edit a.py", kind="edit", status="completed",
                           content=[t.Diff(path="a.py", old_text="x\n", new_text="y\n")]))
    view.update(t.ToolCall(tool_call_id="p", title="Update plan", kind="think",
                           status="completed"))
    view.update(t.ToolCall(tool_call_id="c", title="Run `false`", kind="execute",
                           status="completed", raw_output={"exitCode": 2},
                           content=[t.Content(content=t.TextContent(
                               text="```\noops\n```\nExit code: 2"))]))
    view.finish(t.PromptResponse(stop_reason="end_turn", usage=t.Usage(
        total_tokens=3, input_tokens=2, output_tokens=1)))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    lines = [line.rstrip() for line in out.splitlines()]
    assert "Some bold words." in lines and "**" not in out and "```" not in out
    assert "print(1)" in out and "Done." in lines
    assert "✓ Edit a.py" in lines and "  -x" in lines and "  +y" in lines
    assert "Update plan" not in out  # a plan is shown as the plan
    assert "✗ Run `false`  exit 2" in lines and "  oops" in lines and "  Exit code: 2" in lines
    assert lines[-3:] == ["Plan", " ✔ look", "— stop: end_turn · tokens: 2 in / 1 out"]


@pytest.mark.parametrize(("raw", "shown"), [
    ({"path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"},
     ["  @@ -1 +1 @@", "  -x = 1", "  +x = 2"]),
    ({"path": "a.py", "content": "print(1)\n"}, ["  print(1)"]),
    ({"command": "ls -l"}, ["  $ ls -l"]),
    ({"command": "ls"}, []),  # the title says it already
])
def test_a_question_shows_what_it_is_about(raw: dict[str, Any], shown: list[str]) -> None:
    console = Console(file=io.StringIO(), width=70, color_system=None)
    req = t.RequestPermissionRequest(session_id="s", options=[], tool_call=t.ToolCallUpdate(
        tool_call_id="c", title="Do `ls`", raw_input=raw))
    RichView(console).question(req, [("a", "Allow once"), ("A", "Always allow `ls`")])
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert lines == ["? Allow Do `ls`?", *shown, "  [a] Allow once", "  [A] Always allow `ls`",
                     "  Press a key (Ctrl-C: reject and cancel):"]


# --------------------------------------------------------------------------- client


class Typist:
    """A keyboard on a pipe (or, with ``tty``, a pseudo-terminal): ``type`` writes lines."""

    def __init__(self, tty: bool = False) -> None:
        if tty:
            self.master, slave = os.openpty()
            self.stream = open(slave, closefd=True)  # noqa: SIM115
            self.write_fd = self.master
        else:
            read, self.write_fd = os.pipe()
            self.stream = open(read, closefd=True)  # noqa: SIM115
        self.keyboard = Keyboard(self.stream)

    def type(self, text: str) -> None:
        os.write(self.write_fd, text.encode())

    def close(self) -> None:
        self.keyboard.close()
        os.close(self.write_fd)
        self.stream.close()


class Notes(Renderer):
    """The plain view, with the front end's own lines kept in order."""

    def __init__(self) -> None:
        super().__init__(io.StringIO(), io.StringIO())
        self.notes: list[str] = []
        self.questions: list[str] = []
        self.answers: list[str] = []

    def answered(self, name: str) -> None:
        self.answers.append(name)

    def note(self, text: str, level: str = "info") -> None:
        self.notes.append(text)

    def question(self, req: t.RequestPermissionRequest, choices: list[tuple[str, str]]) -> None:
        self.questions.append(f"{req.tool_call.title}? {question_choices(choices)}")


Turn = Callable[[Connection, t.PromptRequest], Awaitable[t.PromptResponse]]


class Pair:
    """A HumanClient and a fake agent, connected in memory."""

    def __init__(self, turn: Turn, *, policy: Policy = "ask", typist: Typist | None = None) -> None:
        to_agent, to_client = LineReader(), LineReader()
        self.view = Notes()
        self.out = self.view.out
        assert isinstance(self.out, io.StringIO)
        self.typist = typist or Typist()
        self.client = HumanClient(to_client, MemoryPipe(to_agent), self.view, policy=policy,
                                  keyboard=self.typist.keyboard)
        self.asked_to_cancel = 0

        def on_ask_cancel() -> None:
            self.asked_to_cancel += 1

        self.client.on_ask_cancel = on_ask_cancel
        self.agent_writer = MemoryPipe(to_client)
        self.agent = Connection(to_agent, self.agent_writer)
        self.cancelled = asyncio.Event()

        async def initialize(_: t.InitializeRequest) -> t.InitializeResponse:
            return t.InitializeResponse(
                protocol_version=1, auth_methods=[t.AuthMethodAgent(id="x", name="X")])

        async def new(req: t.NewSessionRequest) -> t.NewSessionResponse:
            modes = t.SessionModeState(current_mode_id="ask", available_modes=[
                t.SessionMode(id="ask", name="Ask"), t.SessionMode(id="plan", name="Plan")])
            return t.NewSessionResponse(session_id="s1", modes=modes)

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
        await asyncio.wait_for(self.client.close(), WAIT)
        await self.serving
        self.typist.close()


ALL_KINDS: tuple[t.PermissionOptionKind, ...] = (
    "allow_once", "allow_always", "reject_once", "reject_always")


def ask(conn: Connection, title: str = "Run `ls`",
        kinds: tuple[t.PermissionOptionKind, ...] = ALL_KINDS,
        ) -> Awaitable[t.RequestPermissionResponse]:
    names = {"allow_once": "Allow once", "allow_always": "Always allow `ls`",
             "reject_once": "Reject", "reject_always": "Always reject `ls`"}
    options = [t.PermissionOption(option_id=k, name=names[k], kind=k) for k in kinds]
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

    pair = Pair(turn, policy="allow_once")
    sid = await pair.session()
    result = await pair.client.prompt(sid, "hello")
    await pair.close()
    assert result.stop_reason == "end_turn"
    assert seen == [[t.TextContent(text="hello")], "allow_once", -32601]
    assert isinstance(pair.out, io.StringIO)
    assert pair.out.getvalue() == "Hi\n— stop: end_turn · tokens: 2 in / 1 out\n"


@pytest.mark.parametrize(("policy", "kinds", "answer"), [
    ("allow_once", ("allow_once", "allow_always", "reject_once"), "allow_once"),
    ("allow_always", ("allow_once", "allow_always", "reject_once"), "allow_always"),
    ("allow_always", ("allow_once", "reject_once"), "allow_once"),  # "always" not offered
    ("deny", ("allow_once", "allow_always", "reject_once", "reject_always"), "reject_once"),
    ("deny", ("allow_once", "reject_always"), "reject_always"),
    ("deny", ("allow_once",), "reject_once"),  # never a yes: an option not offered is a no
])
async def test_the_permission_policies(
    policy: Policy, kinds: tuple[t.PermissionOptionKind, ...], answer: str
) -> None:
    answers: list[str] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        answers.append(chosen(await ask(conn, kinds=kinds)))
        return t.PromptResponse(stop_reason="end_turn")

    pair = Pair(turn, policy=policy)
    await pair.client.prompt(await pair.session(), "go")
    await pair.close()
    assert answers == [answer] and pair.view.questions == []


async def test_with_no_one_to_ask_the_agent_is_told_so() -> None:
    """Not "the user rejected": an error the agent passes on to the model in words."""
    errors: list[str] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        for _ in range(2):
            with pytest.raises(RemoteError) as caught:
                await ask(conn)
            errors.append(caught.value.message)
        return t.PromptResponse(stop_reason="end_turn")

    pair = Pair(turn, policy="cannot_ask")
    await pair.client.prompt(await pair.session(), "go")
    await pair.close()
    assert len(errors) == 2 and all("no terminal to ask on" in e for e in errors)
    assert "--yes allows them" in errors[0]
    assert pair.view.notes == []  # the call's failure tells the person: once is enough


async def test_a_question_is_answered_at_the_keyboard() -> None:
    answers: list[str] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        answers.append(chosen(await ask(conn)))
        answers.append(chosen(await ask(conn, kinds=("allow_once", "reject_once"))))
        return t.PromptResponse(stop_reason="end_turn")

    typist = Typist()
    typist.type("what?\nA\nx\nn\n")  # unknown answers ask again
    pair = Pair(turn, typist=typist)
    await pair.client.prompt(await pair.session(), "go")
    await pair.close()
    assert answers == ["allow_always", "reject_once"]
    every = ("[a] Allow once, [A] Always allow `ls`, [r] Reject, [R] Always reject `ls`"
             " (Ctrl-C: reject and cancel)")
    assert pair.view.questions == [  # asked once: a key that is no answer is let be
        f"Run `ls`? {every}", "Run `ls`? [a] Allow once, [r] Reject (Ctrl-C: reject and cancel)"]
    assert pair.view.answers == ["Always allow `ls`", "Reject"]


@pytest.mark.parametrize("how", ["ctrl-c", "ctrl-d"])
async def test_ctrl_c_or_ctrl_d_at_a_question_rejects_and_cancels(how: str) -> None:
    outcomes: list[Any] = []
    asked = asyncio.Event()

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        asking = asyncio.ensure_future(ask(conn))
        asked.set()
        outcomes.append((await asking).outcome)
        return t.PromptResponse(stop_reason="cancelled")

    typist = Typist()
    pair = Pair(turn, typist=typist)
    prompting = asyncio.create_task(pair.client.prompt(await pair.session(), "go"))
    await asked.wait()
    while not typist.keyboard.reading:
        await asyncio.sleep(0.01)
    if how == "ctrl-c":
        assert typist.keyboard.interrupt()
    else:
        os.close(typist.write_fd)
        typist.write_fd = os.open(os.devnull, os.O_WRONLY)
    assert (await asyncio.wait_for(prompting, WAIT)).stop_reason == "cancelled"
    await pair.close()
    assert outcomes == [t.CancelledRequestPermissionOutcome()]
    assert pair.asked_to_cancel == 1 and pair.client.eof == (how == "ctrl-d")
    assert pair.view.notes[-1] == "rejected; cancelling the turn"


async def test_a_withdrawn_question_leaves_the_keyboard_to_the_next_reader() -> None:
    results: list[Any] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        asking = asyncio.ensure_future(ask(conn))
        while not typist.keyboard.reading:
            await asyncio.sleep(0.01)
        asking.cancel()  # the turn was cancelled: $/cancel_request
        try:
            await asking
        except asyncio.CancelledError:
            results.append("withdrawn")
        return t.PromptResponse(stop_reason="cancelled")

    typist = Typist()
    pair = Pair(turn, typist=typist)
    result = await pair.client.prompt(await pair.session(), "go")
    assert result.stop_reason == "cancelled" and results == ["withdrawn"]
    assert "(the question was withdrawn)" in pair.view.notes
    typist.type("next prompt\n")
    assert await asyncio.wait_for(typist.keyboard.readline(), WAIT) == "next prompt\n"
    await pair.close()


async def test_cancel_sends_session_cancel() -> None:
    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        await pair.cancelled.wait()
        return t.PromptResponse(stop_reason="cancelled")

    pair = Pair(turn)
    sid = await pair.session()
    prompting = asyncio.create_task(pair.client.prompt(sid, "go"))
    await asyncio.sleep(0)
    pair.client.cancel_soon(sid)
    assert (await asyncio.wait_for(prompting, WAIT)).stop_reason == "cancelled"
    await pair.close()


async def test_the_session_modes_are_known_and_follow_updates() -> None:
    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        await conn.notify("session/update", t.SessionNotification(
            session_id="s1", update=t.CurrentModeUpdate(current_mode_id="plan")))
        return t.PromptResponse(stop_reason="end_turn")

    pair = Pair(turn)
    await pair.client.prompt(await pair.session(), "/mode plan")
    await pair.close()
    assert pair.client.modes is not None
    assert [m.id for m in pair.client.modes.available_modes] == ["ask", "plan"]
    assert pair.client.modes.current_mode_id == "plan"


# --------------------------------------------------------------------------- keyboard


async def test_the_keyboard_reads_lines_from_a_pipe_then_the_end() -> None:
    typist = Typist()
    typist.type("one\ntw")
    assert await asyncio.wait_for(typist.keyboard.readline(), WAIT) == "one\n"
    typist.type("o\nlast")
    assert await asyncio.wait_for(typist.keyboard.readline(), WAIT) == "two\n"
    os.close(typist.write_fd)
    typist.write_fd = os.open(os.devnull, os.O_WRONLY)
    assert await asyncio.wait_for(typist.keyboard.readline(), WAIT) == "last"  # as a file reads
    assert await asyncio.wait_for(typist.keyboard.readline(), WAIT) is None
    assert await typist.keyboard.readline() is None  # and it stays ended
    typist.close()


async def test_on_a_terminal_typeahead_is_dropped_and_echo_is_off_between_reads() -> None:
    import termios

    typist = Typist(tty=True)
    kb = typist.keyboard
    fd = typist.stream.fileno()
    kb.listen()
    assert termios.tcgetattr(fd)[3] & termios.ECHO
    typist.type("yes\n")
    assert await asyncio.wait_for(kb.readline(), WAIT) == "yes\n"
    assert not termios.tcgetattr(fd)[3] & termios.ECHO  # typing during a turn: not shown
    typist.type("stray enter\n")  # typed while no question was on screen
    while not kb._lines:  # read by the loop (kept until the next question starts)
        await asyncio.sleep(0.01)
    kb.listen()  # a question: what was typed before it is dropped
    typist.type("meant\n")
    assert await asyncio.wait_for(kb.readline(), WAIT) == "meant\n"
    reading = asyncio.create_task(kb.readline())
    while not kb.reading:
        await asyncio.sleep(0.01)
    assert kb.interrupt() and not kb.interrupt()
    with pytest.raises(Interrupted):
        await reading
    kb.listen()
    typist.type("\x04")  # Ctrl-D on an empty line
    assert await asyncio.wait_for(kb.readline(), WAIT) is None
    kb.close()
    assert termios.tcgetattr(fd)[3] & termios.ECHO  # the terminal's modes are given back
    typist.close()


async def test_when_the_agent_goes_away_waiting_requests_fail() -> None:
    started = asyncio.Event()

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        started.set()
        await asyncio.Event().wait()  # never answers: the agent goes away first
        raise AssertionError("not reached")

    pair = Pair(turn)
    sid = await pair.session()
    prompting = asyncio.create_task(pair.client.prompt(sid, "go"))
    await started.wait()
    await pair.agent_writer.aclose()  # the agent's stdout closes mid-turn
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(prompting, WAIT)
    with pytest.raises(ConnectionClosed):  # and so does anything asked later
        await asyncio.wait_for(pair.client.prompt(sid, "again"), WAIT)
    await pair.agent.close(grace=0)
    await pair.close()


async def test_requests_made_while_the_connection_closes_fail_at_once() -> None:
    reader = LineReader()
    handled, release = asyncio.Event(), asyncio.Event()

    async def slow(_: Any) -> None:
        handled.set()
        await release.wait()

    conn = Connection(reader, MemoryPipe(LineReader()), {"slow": Route(dict, slow)})
    reader.feed(b'{"jsonrpc":"2.0","id":1,"method":"slow","params":{}}\n')
    reader.feed_eof()
    await conn.serve()
    await handled.wait()
    closing = asyncio.create_task(conn.close(grace=WAIT))  # the handler gets its grace
    await asyncio.sleep(0)
    with pytest.raises(ConnectionClosed):  # nothing could answer it: it fails or it hangs
        await asyncio.wait_for(conn.request("ping", {}, dict), WAIT)
    assert not closing.done()  # it failed while the handler still had its grace
    release.set()
    await closing


# --------------------------------------------------------------------------- framing


async def test_open_child_wires_a_subprocess_pipes() -> None:
    code = "import sys\nfor line in sys.stdin: sys.stdout.write(line.upper()); sys.stdout.flush()"
    proc, reader, writer = await open_child(sys.executable, "-c", code)
    writer.write_line(b'{"a": 1}\n')
    await writer.drain()
    assert await asyncio.wait_for(reader.readline(), WAIT) == b'{"A": 1}'
    await writer.aclose()  # the child's input ends, so it exits, so its output ends
    assert await asyncio.wait_for(proc.wait(), WAIT) == 0
    assert await asyncio.wait_for(reader.readline(), WAIT) is None




# --------------------------------------------------------------------------- Ctrl-C


class CancelRecorder:
    def __init__(self) -> None:
        self.cancels: list[str] = []

    def cancel_soon(self, session_id: str) -> None:
        self.cancels.append(session_id)


async def test_ctrl_c_cancels_a_turn_and_a_second_one_quits() -> None:
    options = Options(command="chat", prompt=None, cwd="/", policy="deny", save=True,
                      json=False, debug=False, model="offline")
    session = Session(options, [])
    session.view = Notes()
    recorder = CancelRecorder()
    session.client = recorder  # type: ignore[assignment]  # a fake: only cancel_soon
    session.sid, session.in_turn = "s1", True
    main = asyncio.ensure_future(asyncio.Event().wait())
    session._main = main
    session.on_interrupt()
    assert recorder.cancels == ["s1"] and session.cancelling and session.quit_status is None
    notes = session.view.notes
    assert notes == ["cancelling the turn… (Ctrl-C again quits)"]
    session.on_interrupt()  # the cancel takes its time: a second Ctrl-C quits
    assert recorder.cancels == ["s1"] and session.quit_status == 130
    with pytest.raises(asyncio.CancelledError):
        await main


def test_markdown_blocks_stand_one_blank_line_apart_at_the_left_margin() -> None:
    console = Console(file=io.StringIO(), width=40, color_system=None)
    view = RichView(console)
    text = "# Title\n\nSome paragraph.\n\n## Sub\n\n- a\n- b\n\nEnd.\n"
    for i in range(0, len(text), 5):  # streamed in small pieces
        view.update(t.AgentMessageChunk(content=t.TextContent(text=text[i:i + 5])))
    view.close()
    view._flush(final=True)
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert lines == ["Title", "", "Some paragraph.", "", "Sub", "", " • a", " • b", "", "End.", ""]


def test_when_a_session_was_last_active_in_words() -> None:
    import time as clock

    from acp_agent.human.resume import ago

    def stamp(seconds_ago: float) -> str:
        return clock.strftime("%Y-%m-%dT%H:%M:%S.000Z", clock.gmtime(clock.time() - seconds_ago))

    assert [ago(stamp(s)) for s in (5, 300, 7200, 3 * 86400)] == [
        "just now", "5 min ago", "2 h ago", "3 days ago"]
    old = stamp(30 * 86400)
    assert ago(old) == old[:10] and ago(None) == "?" and ago("not a time") == "not a time"


def test_a_replay_is_cut_into_exchanges_and_its_end_shown() -> None:
    from acp_agent.human.resume import exchanges, show_end

    def user(text: str, mid: str) -> t.UserMessageChunk:
        return t.UserMessageChunk(content=t.TextContent(text=text), message_id=mid)

    def said(text: str) -> t.AgentMessageChunk:
        return t.AgentMessageChunk(content=t.TextContent(text=text))

    usage = t.UsageUpdate(used=5, size=100, cost=t.Cost(amount=0.25, currency="USD"))
    updates: list[t.SessionUpdate] = [usage]
    for n in range(5):
        updates += [user(f"ask {n}", f"u{n}"), user(" more", f"u{n}"),
                    t.AgentThoughtChunk(content=t.TextContent(text="hmm")), said(f"answer {n}")]
    before, cut = exchanges(updates)
    assert before == [usage] and [text for text, _ in cut][:2] == ["ask 0 more", "ask 1 more"]
    view = Notes()
    show_end(view, updates, count=2)
    assert view.notes == ["… 3 earlier exchanges (the model has them all)", "> ask 3 more",
                          "> ask 4 more"]
    assert view.out.getvalue() == "answer 3\nanswer 4\n"  # type: ignore[attr-defined]
    assert "hmm" not in view.out.getvalue()  # type: ignore[attr-defined]
    view.begin_turn()
    assert view.cost_before == 0.25  # the session's cost, learnt from the replay
async def test_the_question_before_overwriting_changed_files_is_asked_even_under_yes() -> None:
    """``--yes`` allows tool calls; whether ``/undo`` overwrites what the user changed
    since is still theirs to say (and without a terminal the files are kept)."""
    answers: list[str] = []

    async def turn(conn: Connection, req: t.PromptRequest) -> t.PromptResponse:
        options = [t.PermissionOption(option_id="overwrite", name="Put them back",
                                      kind="allow_once"),
                   t.PermissionOption(option_id="keep", name="Keep them", kind="reject_once")]
        call = t.ToolCallUpdate(tool_call_id="u", title="Undo: overwrite 1 file(s)", name="undo")
        response = await conn.request(
            "session/request_permission",
            t.RequestPermissionRequest(session_id="s1", options=options, tool_call=call),
            t.RequestPermissionResponse)  # fmt: skip
        answers.append(chosen(response))
        return t.PromptResponse(stop_reason="end_turn")

    typist = Typist()
    typist.type("r\n")
    pair = Pair(turn, policy="allow_always", typist=typist)
    await pair.client.prompt(await pair.session(), "/undo")
    await pair.close()
    assert answers == ["keep"]
    assert pair.view.questions == [
        "Undo: overwrite 1 file(s)? [a] Put them back, [r] Keep them (Ctrl-C: reject and cancel)"]
