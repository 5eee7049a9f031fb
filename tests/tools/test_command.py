"""run_command: local process groups, and the editor's terminals."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import RemoteError, ToolError
from acp_agent.protocol import types as t
from acp_agent.tools import budget
from acp_agent.tools.command import RunCommand

from ..limits import eventually
from ..procs import group_gone
from ..schema_check import validate_def
from ..timeouts import ManualTimeouts
from .fake_client import FakeClient, MakeClient, wire
from .raw import Raw

run = Raw(RunCommand())


def _pid(path: Path) -> int | None:
    """The pid a command wrote to ``path`` (None until it has written it whole)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") else None


async def _pid_written(path: Path) -> int:
    await eventually(lambda: _pid(path) is not None, f"the command writes its pid to {path}")
    pid = _pid(path)
    assert pid is not None
    return pid


# ---------------------------------------------------------------------- metadata


def test_title_access_permission_key(ws: Path, fake: MakeClient) -> None:
    ctx = fake().context(str(ws))
    assert run.title({"command": "pytest -q"}, ctx) == "Run `pytest -q`"
    assert run.title({"command": "ls", "cwd": "src"}, ctx) == "Run `ls` in src"
    assert run.kind == "execute"
    assert run.access({"command": "ls"}, ctx) == ("execute", [str(ws)])
    assert run.access({"command": "ls", "cwd": "src"}, ctx) == ("execute", [str(ws / "src")])
    def covers(command: str, cwd: str = "") -> tuple[str, str]:
        scope = run.scope({"command": command, "cwd": cwd}, ctx)
        assert scope is not None and scope.kind == "command"
        return scope.target.split("\0")[1], scope.label

    # exactly that program with exactly those arguments, in that directory
    assert covers("git status --short") == ("git status --short", "`git status --short`")
    assert covers("  'my tool'   --x") == ("'my tool' --x", "`'my tool' --x`")  # shlex-normal
    assert covers("ls", "src") == ("ls", "`ls` in src")
    assert covers("echo 'unbalanced") == ("echo 'unbalanced", "`echo 'unbalanced`")  # as typed
    assert covers("ls && rm -rf ~") == ("ls && rm -rf ~", "`ls && rm -rf ~`")
    assert run.scope({"command": "ls"}, ctx) != run.scope({"command": "ls", "cwd": "src"}, ctx)
    with pytest.raises(ToolError):
        run.access({}, ctx)


# ---------------------------------------------------------------------- local


async def test_local_output_exit_code_cwd(ws: Path, fake: MakeClient, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    client = fake(read=True, write=True)  # no terminal capability
    ctx = client.context(str(ws))
    out = await run.run({"command": "pwd; echo err >&2; exit 3", "cwd": "src"}, ctx)
    assert out.text == f"{ws / 'src'}\nerr\n\nExit code: 3"
    assert out.raw_output == {"exitCode": 3, "signal": None, "output": f"{ws / 'src'}\nerr\n",
                              "truncated": False, "timedOut": False, "sandbox": "off"}
    assert client.calls == [] and client.emitted == []
    body = wire(out.content)[0]["content"]["text"]
    assert body.startswith("```\n") and body.endswith("Exit code: 3")
    default_cwd = await run.run({"command": "pwd"}, ctx)
    assert default_cwd.text.startswith(str(ws) + "\n")
    with pytest.raises(ToolError, match="working directory"):
        await run.run({"command": "true", "cwd": "nope"}, ctx)


async def test_local_timeout_kills_group(ws: Path, fake: MakeClient,
                                         manual_timeouts: ManualTimeouts) -> None:
    ctx = fake().context(str(ws))
    task = asyncio.create_task(run.run(
        {"command": "echo started; sleep 30 & echo $$ > pid; sleep 30", "timeout_ms": 300}, ctx))
    pgid = await _pid_written(ws / "pid")
    await manual_timeouts.expire()  # the 0.3 s are up
    out = await task
    assert manual_timeouts.delays == [0.3]
    assert out.raw_output["timedOut"] is True
    assert "started" in out.text and "Timed out after 0.3 s" in out.text
    await group_gone(pgid)


async def test_local_background_job_holding_output_does_not_hang(
    ws: Path, fake: MakeClient
) -> None:
    """The shell exits while a background job holds the output pipe: after a grace
    period (``shell.PIPE_GRACE``) the job is killed and the call returns."""
    out = await run.run({"command": "echo $$ > pid; echo hi; sleep 30 &"},
                        fake().context(str(ws)))
    assert out.text == "hi\n\nExit code: 0"
    await group_gone(int((ws / "pid").read_text()))


async def test_local_flood_is_bounded(ws: Path, fake: MakeClient) -> None:
    cmd = "echo FIRST; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST"
    out = await run.run({"command": cmd}, fake().context(str(ws)))
    assert out.raw_output["truncated"] is True
    assert len(out.raw_output["output"]) <= budget.COMMAND_MAX_BYTES + 300
    assert out.text.startswith("FIRST\n" + "x" * 100)
    assert ("x\n[... 2,970,012 bytes of output omitted. To see all of it, redirect the output "
            "to a file (`cmd > out.log 2>&1`) and read it in parts with read_file (offset/limit) "
            "or grep.]\nxxx") in out.text
    assert out.text.endswith("LAST\n\nExit code: 0")


async def test_local_cancel_kills_group(ws: Path, fake: MakeClient) -> None:
    ctx = fake().context(str(ws))
    task = asyncio.create_task(run.run(
        {"command": "sleep 30 & echo $$ > pid; sleep 30; echo never"}, ctx))
    pgid = await _pid_written(ws / "pid")  # the background job has started by then
    os.killpg(pgid, 0)  # running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await group_gone(pgid)


async def test_local_cancel_while_starting_kills_what_the_shell_started(
    ws: Path, fake: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while the command is still being started (asyncio has not returned the
    process yet, but the shell already runs and has started a job): the whole group
    is killed once the start completes, not only the shell."""
    real_start = asyncio.create_subprocess_exec
    started, finish_start = asyncio.Event(), asyncio.Event()

    async def slow_start(*args: Any, **kw: Any) -> asyncio.subprocess.Process:
        proc = await real_start(*args, **kw)
        started.set()
        await finish_start.wait()  # the call is cancelled here
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", slow_start)
    task = asyncio.create_task(run.run(
        {"command": "sleep 3600 & echo $$ > pid; sleep 3600"}, fake().context(str(ws))))
    await started.wait()
    pgid = await _pid_written(ws / "pid")  # the background job has started by then
    try:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        finish_start.set()
        await group_gone(pgid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


async def test_local_signal_exit(ws: Path, fake: MakeClient) -> None:
    out = await run.run({"command": "kill -TERM $$"}, fake().context(str(ws)))
    assert out.raw_output["signal"] == "SIGTERM" and out.raw_output["exitCode"] is None
    assert "Killed by signal SIGTERM" in out.text


# ---------------------------------------------------------------------- editor terminal


async def test_terminal_route(ws: Path, fake: MakeClient) -> None:
    client: FakeClient = fake(terminal=True)
    ctx = client.context(str(ws))
    out = await run.run({"command": "echo hello; echo oops >&2; exit 2", "cwd": "src"}, ctx)
    assert client.methods == ["terminal/create", "terminal/wait_for_exit", "terminal/output",
                              "terminal/release"]
    create = wire(client.calls[0][1])
    assert create["command"] == "/bin/sh"
    assert create["args"] == ["-c", "echo hello; echo oops >&2; exit 2"]
    assert create["cwd"] == str(ws / "src")
    assert create["outputByteLimit"] == budget.COMMAND_MAX_BYTES
    assert create["sessionId"] == "sess-1"
    # the terminal is embedded in the tool call before anything else happens to it
    kinds = [e[0] if e[0] == "emit" else e[1][0] for e in client.events]
    assert kinds[:3] == ["terminal/create", "emit", "terminal/wait_for_exit"]
    assert wire(client.emitted[0]) == {"sessionUpdate": "tool_call_update",
                                       "toolCallId": "call-1",
                                       "content": [{"type": "terminal", "terminalId": "term-1"}]}
    assert out.text == "hello\noops\n\nExit code: 2"
    assert out.raw_output["exitCode"] == 2 and out.raw_output["timedOut"] is False
    assert wire(out.content)[0] == {"type": "terminal", "terminalId": "term-1"}
    assert all(validate_def("ToolCallContent", c) == [] for c in wire(out.content))
    assert client.terminals["term-1"].released


async def test_terminal_timeout_kills_outputs_releases(
    ws: Path, fake: MakeClient, manual_timeouts: ManualTimeouts
) -> None:
    client: FakeClient = fake(terminal=True)
    task = asyncio.create_task(run.run(
        {"command": "echo partial; echo $$ > pid; sleep 30", "timeout_ms": 300},
        client.context(str(ws))))
    await _pid_written(ws / "pid")
    await manual_timeouts.expire()
    out = await task
    assert manual_timeouts.delays == [0.3]
    assert client.methods == ["terminal/create", "terminal/wait_for_exit", "terminal/kill",
                              "terminal/output", "terminal/release"]
    assert out.raw_output["timedOut"] is True and "partial" in out.text
    assert "Timed out" in out.text
    term = client.terminals["term-1"]
    assert term.killed and term.released and term.proc.returncode is not None


async def test_terminal_cancel_kills_and_releases(ws: Path,
                                                 fake: MakeClient) -> None:
    client: FakeClient = fake(terminal=True)
    task = asyncio.create_task(run.run({"command": "sleep 30"}, client.context(str(ws))))
    await eventually(lambda: "terminal/wait_for_exit" in client.methods, "waiting for the exit")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.methods[-2:] == ["terminal/kill", "terminal/release"]
    term = client.terminals["term-1"]
    assert term.released and term.proc.returncode is not None


async def test_terminal_cancel_during_create_still_releases(
    ws: Path, fake: MakeClient
) -> None:
    client: FakeClient = fake(terminal=True)
    client.gates["terminal/create"] = created = asyncio.Event()  # the editor is slow
    task = asyncio.create_task(run.run({"command": "sleep 30"}, client.context(str(ws))))
    await eventually(lambda: "terminal/create" in client.methods, "terminal/create was sent")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    created.set()  # the terminal exists after all: it must be cleaned up
    await eventually(lambda: "terminal/release" in client.methods, "the terminal is released")
    assert client.methods == ["terminal/create", "terminal/kill", "terminal/release"]
    assert client.terminals["term-1"].released


async def test_terminal_release_survives_a_second_cancel(
    ws: Path, fake: MakeClient
) -> None:
    client: FakeClient = fake(terminal=True)
    client.gates["terminal/kill"] = killed = asyncio.Event()  # the editor is slow to kill
    task = asyncio.create_task(run.run({"command": "sleep 30"}, client.context(str(ws))))
    await eventually(lambda: "terminal/wait_for_exit" in client.methods, "waiting for the exit")
    task.cancel()
    await eventually(lambda: "terminal/kill" in client.methods, "terminal/kill was sent")
    task.cancel()  # impatient: cancel again while cleaning up
    with pytest.raises(asyncio.CancelledError):
        await task
    killed.set()
    await eventually(lambda: client.terminals["term-1"].released, "the terminal is released")
    assert client.methods[-2:] == ["terminal/kill", "terminal/release"]


async def test_terminal_output_bounded_and_truncation_reported(ws: Path, fake: MakeClient) -> None:
    client: FakeClient = fake(terminal=True)
    out = await run.run({"command": "head -c 200000 /dev/zero | tr '\\0' y; echo; echo END"},
                        client.context(str(ws)))
    assert out.raw_output["truncated"] is True
    assert out.text.startswith("[The editor's terminal cut the beginning of the output")
    body = out.text.split("\n", 1)[1]
    assert len(body.encode()) <= budget.COMMAND_MAX_BYTES + len("\n\nExit code: 0")
    assert out.text.endswith("END\n\nExit code: 0")


async def test_terminal_errors(ws: Path, fake: MakeClient) -> None:
    client: FakeClient = fake(terminal=True)
    client.fail["terminal/create"] = RemoteError(-32603, "no shells today")
    with pytest.raises(ToolError, match="no shells today"):
        await run.run({"command": "true"}, client.context(str(ws)))
    assert client.methods == ["terminal/create"]
    broken: FakeClient = fake(terminal=True)
    broken.fail["terminal/output"] = RemoteError(-32603, "lost it")
    with pytest.raises(ToolError, match="lost it"):
        await run.run({"command": "true"}, broken.context(str(ws)))
    assert broken.methods[-2:] == ["terminal/kill", "terminal/release"]


def test_no_terminal_calls_without_capability() -> None:
    client = FakeClient(read=True, write=True)
    assert not client.allows("terminal/create")
    assert isinstance(client.capabilities, t.ClientCapabilities)


async def test_terminal_truncated_flag_becomes_a_marker(
        ws: Path, fake: MakeClient) -> None:  # fmt: skip
    """The editor keeps only the last output_byte_limit bytes and says `truncated`: the
    model is told the beginning is gone and how to see everything."""
    client = fake(terminal=True)
    out = await run.run({"command": "seq 1 20000"}, client.context(str(ws)))
    term = client.terminals["term-1"]
    assert term.truncated and term.limit == budget.COMMAND_MAX_BYTES
    first, rest = out.text.split("\n", 1)
    assert first == (
        "[The editor's terminal cut the beginning of the output (it keeps the last 30,000 "
        "bytes). To see all of it, redirect the output to a file (`cmd > out.log 2>&1`) and "
        "read it in parts with read_file (offset/limit) or grep.]")
    assert rest.endswith("\n19999\n20000\n\nExit code: 0")
    assert out.raw_output["truncated"] is True
    small: FakeClient = fake(terminal=True)
    plain = await run.run({"command": "echo hi"}, small.context(str(ws)))
    assert plain.text == "hi\n\nExit code: 0" and plain.raw_output["truncated"] is False
