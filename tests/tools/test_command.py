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
from acp_agent.tools import budget, output, terminal, usershell
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
                              "truncated": False, "timedOut": False, "savedOutput": None,
                              "sandbox": "off"}
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


async def test_local_flood_keeps_head_and_tail_and_saves_all(
    ws: Path, fake: MakeClient, tmp_path: Path
) -> None:
    """A flood: the model reads its beginning and its end within the token budget, the
    marker names the file holding all of it, and that file is complete."""
    cmd = "echo FIRST; head -c 3000000 /dev/zero | tr '\\0' x; echo; seq 1 5000; echo LAST"
    ctx = fake().context(str(ws))
    ctx.outputs = str(tmp_path / "outputs" / "sess-1")
    out = await run.run({"command": cmd}, ctx)
    assert out.raw_output["truncated"] is True and not out.is_error
    assert budget.estimate_tokens(out.text) <= budget.COMMAND_MAX_TOKENS + 200  # and the marker
    assert out.text.startswith("FIRST\n" + "x" * 100)
    assert out.text.endswith("4999\n5000\nLAST\n\nExit code: 0")
    saved = out.raw_output["savedOutput"]
    assert saved is not None and os.path.dirname(saved) == ctx.outputs
    assert f"of output omitted. All of it is saved in {saved}: read_file it" in out.text
    full = (await asyncio.create_subprocess_shell(cmd, stdout=asyncio.subprocess.PIPE))
    expected, _ = await full.communicate()
    assert Path(saved).read_bytes() == expected
    assert ctx.saved_output(saved) and not ctx.inside_roots(saved)


async def test_cut_output_without_a_directory_says_how_to_see_it(
    ws: Path, fake: MakeClient
) -> None:
    out = await run.run({"command": "seq 1 100000"}, fake().context(str(ws)))
    assert out.raw_output["savedOutput"] is None
    assert "of output omitted. To see all of it, redirect the output to a file" in out.text
    assert out.text.startswith("1\n2\n") and out.text.endswith("100000\n\nExit code: 0")


def test_saved_outputs_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file holds at most MAX_FILE_BYTES (the marker says so); the directory at most
    MAX_DIR_BYTES, the oldest files deleted first."""
    monkeypatch.setattr(output, "KEEP_BYTES", 100)
    monkeypatch.setattr(output, "MAX_FILE_BYTES", 1000)
    monkeypatch.setattr(output, "MAX_DIR_BYTES", 2500)
    directory = tmp_path / "out"
    saved = []
    for i in range(4):
        capture = output.Capture(str(directory))
        for _ in range(30):
            capture.feed(f"{i}".encode() * 99 + b"\n")
        got = capture.finish()
        assert got.saved is not None and Path(got.saved).stat().st_size == 1000
        assert "(the first 1,000 bytes of 3,000 bytes) is saved in" in got.text
        os.utime(got.saved, (1_700_000_000 + i,) * 2)
        saved.append(got.saved)
    assert sorted(os.listdir(directory)) == sorted(os.path.basename(p) for p in saved[-2:])


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
    assert out.is_error  # an error result, unlike an exit code
    failing = await run.run({"command": "exit 3"}, fake().context(str(ws)))
    assert not failing.is_error and failing.text.endswith("Exit code: 3")


# ---------------------------------------------------------------------- the user's shell


async def test_bash_syntax_runs_in_the_users_bash(
    ws: Path, fake: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under SHELL=/bin/bash commands run in bash (not sh: dash on Debian), and the
    description names exactly that."""
    monkeypatch.setenv("SHELL", "/bin/bash")
    usershell.user_shell.cache_clear()
    try:
        tool = RunCommand()
        assert "Run a command line as `/bin/bash -c <command>`" in tool.spec.description
        cmd = ("[[ a == a ]] && echo double; echo {x,y}; echo out &> both.txt; cat both.txt;"
               " v=word; echo ${v^^}; source /dev/null && echo sourced")
        out = await Raw(tool).run({"command": cmd}, fake().context(str(ws)))
        assert out.text == "double\nx y\nout\nWORD\nsourced\n\nExit code: 0"
    finally:
        usershell.user_shell.cache_clear()


def test_which_shell(tmp_path: Path) -> None:
    """$SHELL when bash or zsh; else bash on PATH; else /bin/sh."""
    bash = usershell.choose({"SHELL": "/bin/bash"})
    assert (bash.path, bash.name, bash.why) == ("/bin/bash", "bash", "your $SHELL")
    fish = usershell.choose({"SHELL": "/usr/bin/fish", "PATH": "/usr/bin:/bin"})
    assert fish.name == "bash" and fish.why == "your $SHELL (/usr/bin/fish) is not bash or zsh"
    assert fish.argv("ls") == [fish.path, "-c", "ls"]
    nothing = usershell.choose({"PATH": str(tmp_path)})
    assert nothing.path == "/bin/sh" and "bash was not found" in nothing.why


async def test_login_environment_is_read_once_from_a_login_shell(tmp_path: Path) -> None:
    """``bash -l`` reads the profile: what it exports is there; a profile that hangs is
    given up on, and says so."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text('export FROM_PROFILE=yes; PATH="$HOME/tool/bin:$PATH"\n'
                                        "echo noise from the profile\n")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    bash = usershell.choose({"SHELL": "/bin/bash"})
    got = await usershell.login_environment(bash, str(tmp_path), env)
    assert got.env is not None and got.env["FROM_PROFILE"] == "yes"
    assert got.env["PATH"].startswith(f"{home}/tool/bin:") and "LC_CTYPE" not in got.env
    (home / ".bash_profile").write_text("sleep 30\n")
    slow = await usershell.login_environment(bash, str(tmp_path), env, timeout=0.5)
    assert slow.env is None and slow.problem == "/bin/bash -l took more than 0.5 s"
    sh = await usershell.login_environment(usershell.Shell("/bin/sh", "sh", ""), "/", env)
    assert sh.env is None


# ---------------------------------------------------------------------- editor terminal


async def test_terminal_route(ws: Path, fake: MakeClient) -> None:
    client: FakeClient = fake(terminal=True)
    ctx = client.context(str(ws))
    out = await run.run({"command": "echo hello; echo oops >&2; exit 2", "cwd": "src"}, ctx)
    assert client.methods == ["terminal/create", "terminal/wait_for_exit", "terminal/output",
                              "terminal/release"]
    create = wire(client.calls[0][1])
    assert create["command"] == usershell.user_shell().path  # as on the local route
    assert create["args"] == ["-c", "echo hello; echo oops >&2; exit 2"]
    assert create["cwd"] == str(ws / "src")
    assert create["outputByteLimit"] == budget.TERMINAL_OUTPUT_BYTES
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
    assert "Timed out" in out.text and out.is_error
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


async def test_terminal_output_keeps_head_and_tail(
    ws: Path, fake: MakeClient, tmp_path: Path
) -> None:
    """The editor is asked for enough output; the cut for the model is ours, head kept."""
    client: FakeClient = fake(terminal=True)
    ctx = client.context(str(ws))
    ctx.outputs = str(tmp_path / "outputs")
    out = await run.run({"command": "echo FIRST ERROR; seq 1 100000; echo END"}, ctx)
    assert out.raw_output["truncated"] is True
    assert out.text.startswith("FIRST ERROR\n1\n2\n")
    assert out.text.endswith("100000\nEND\n\nExit code: 0")
    assert budget.estimate_tokens(out.text) <= budget.COMMAND_MAX_TOKENS + 200  # and the marker
    saved = Path(out.raw_output["savedOutput"])
    text = saved.read_text()
    assert text.splitlines()[-1] == "END" and len(text) == 12 + 588_895 + 4


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
        ws: Path, fake: MakeClient, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The editor keeps only the last output_byte_limit bytes and says `truncated`: the
    model is told the beginning is gone."""
    monkeypatch.setattr(terminal, "TERMINAL_OUTPUT_BYTES", 30_000)
    client = fake(terminal=True)
    out = await run.run({"command": "seq 1 20000"}, client.context(str(ws)))
    term = client.terminals["term-1"]
    assert term.truncated and term.limit == 30_000
    first, rest = out.text.split("\n", 1)
    assert first == ("[The editor's terminal kept only the last 30,000 bytes of the output; "
                     "its beginning is lost]")
    assert rest.endswith("\n19999\n20000\n\nExit code: 0")
    assert out.raw_output["truncated"] is True
    small: FakeClient = fake(terminal=True)
    plain = await run.run({"command": "echo hi"}, small.context(str(ws)))
    assert plain.text == "hi\n\nExit code: 0" and plain.raw_output["truncated"] is False
