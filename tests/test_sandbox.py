"""Issue 23, item 5: commands in a kernel sandbox, tried against the real kernel
(bubblewrap: nothing of the sandbox is mocked; where ``bwrap`` is missing these tests
fail, they never skip). The same probe (``sandbox_probe.py``) runs on every route: the
local ``run_command``, the editor's terminal (the fake editor really runs the command
line it is handed), and a subagent's command over ACP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acp_agent.config import from_mapping
from acp_agent.engine.probe import detected
from acp_agent.engine.sandboxing import Sandboxing
from acp_agent.tools.command import RunCommand

from .harness import ResponseError, Scripted, agent_env
from .limits import WAIT, eventually
from .tools.fake_client import FakeClient
from .tools.raw import Raw

PROBE = Path(__file__).with_name("sandbox_probe.py")
ALL = ("write_inside", "modify_inside", "write_tmp", "read_outside", "write_outside",
       "modify_outside", "write_through_link", "write_through_dotdot", "write_git_config",
       "write_nested_git_config", "write_nested_git_hook", "write_nested_repo", "read_hidden",
       "read_state", "connect_loopback")  # fmt: skip
EXPECTED = {
    "off": dict.fromkeys(ALL, True),
    "workspace-write": {**dict.fromkeys(ALL, False), "write_inside": True, "modify_inside": True,
                        "write_tmp": True, "read_outside": True, "write_nested_repo": True},
    "read-only": {**dict.fromkeys(ALL, False), "write_tmp": True, "read_outside": True},
}  # fmt: skip
run = Raw(RunCommand())


def test_bubblewrap_works_here() -> None:
    """The sandbox tests need bubblewrap: `.ci/run` installs it (Debian `bubblewrap`)."""
    found = detected()
    assert found.program is not None, f"install bubblewrap to run these tests: {found.why_not}"


@dataclass
class Place:
    """A workspace (a git repository with a link out of it), the directory beside it,
    a hidden one, the agent's state directory, and a loopback listener."""

    ws: Path
    outside: Path
    hidden: Path
    state: Path
    listener: socket.socket

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def command(self) -> str:
        args = [sys.executable, str(PROBE), str(self.outside), str(self.hidden),
                str(self.state), str(self.port)]  # fmt: skip
        return " ".join(f"'{a}'" for a in args)

    def untouched(self) -> None:
        """Whatever the sandbox refused really did not happen."""
        assert (self.outside / "existing.txt").read_text() == "outside\n"
        assert sorted(p.name for p in self.outside.iterdir()) == ["existing.txt"]
        assert "probe" not in (self.ws / ".git" / "config").read_text()
        nested = self.ws / "vendor" / "lib" / ".git"
        assert "probe" not in (nested / "config").read_text()
        assert list((nested / "hooks").iterdir()) == []
        self.listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody connected
            self.listener.accept()


@pytest.fixture
def place(tmp_path: Path, state_dir: str) -> Iterator[Place]:
    """(``state``: the agents' state directory, the ``state_dir`` fixture.)"""
    ws, outside, hidden = (tmp_path / n for n in ("ws", "outside", "hidden"))
    state = Path(state_dir)
    for d in (ws / ".git", outside, hidden):
        d.mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "vendor" / "lib" / ".git" / "hooks").mkdir(parents=True)  # a repository inside
    (ws / "vendor" / "lib" / ".git" / "config").write_text("[core]\n")
    (ws / "vendor" / "lib" / "code.py").write_text("x = 1\n")
    (ws / "existing.txt").write_text("inside\n")
    (ws / "link-out").symlink_to(outside)
    (outside / "existing.txt").write_text("outside\n")
    (hidden / "secret.txt").write_text("hidden\n")
    (state / "probe.txt").write_text("state\n")
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        yield Place(ws, outside, hidden, state, listener)
    finally:
        listener.close()


async def sandboxing(place: Place) -> Sandboxing:
    config = from_mapping({"state-dir": str(place.state),
                           "sandbox": {"hide": [str(place.hidden)]}})  # fmt: skip
    box = Sandboxing(config)
    assert (await box.ready()).program is not None
    return box


async def probe(place: Place, level: str, terminal: bool) -> dict[str, bool]:
    client = FakeClient(terminal=terminal)
    try:
        ctx = client.context(str(place.ws))
        ctx.sandbox = (await sandboxing(place)).sandbox(level, [str(place.ws)])  # type: ignore[arg-type]
        out = await run.run({"command": place.command()}, ctx)
    finally:
        await client.close()
    assert out.raw_output["exitCode"] == 0, out.text
    assert out.raw_output["sandbox"] == level
    if terminal:  # the editor was handed the sandbox's command line
        (method, params), *_ = client.calls
        assert method == "terminal/create"
        assert params.command.endswith("bwrap") == (level != "off")  # else the user's shell
    return probed(out.raw_output["output"])


def probed(output: str) -> dict[str, bool]:
    """The probe's JSON line (a Python under coverage may complain after it: it cannot
    write its data file in a read-only sandbox)."""
    result: dict[str, bool] = json.loads(output.splitlines()[0])
    return result


@pytest.mark.parametrize("terminal", [False, True], ids=["local", "editor-terminal"])
@pytest.mark.parametrize("level", ["workspace-write", "read-only", "off"])
async def test_what_a_command_may_do_at_each_level(
    place: Place, level: str, terminal: bool
) -> None:
    """workspace-write: writes inside the roots only (never through a link or `..` out
    of them, never a `.git`, the root's or a nested repository's), no hidden path, no
    network; read-only: not even the roots; off: everything (the probe can tell)."""
    assert await probe(place, level, terminal) == EXPECTED[level]
    if level != "off":
        place.untouched()


async def test_the_title_and_the_result_say_the_sandbox_refused(place: Place) -> None:
    """The call says it runs sandboxed; a refusal says so, and how to leave."""
    client = FakeClient()
    ctx = client.context(str(place.ws))
    ctx.sandbox = (await sandboxing(place)).sandbox("workspace-write", [str(place.ws)])
    assert run.title({"command": "make"}, ctx) == "Run `make` (sandboxed: workspace-write)"
    leaving = {"command": "make", "outside_sandbox": "it pushes"}
    assert run.title(leaving, ctx) == "Run `make` outside the sandbox (why: it pushes)"
    out = await run.run({"command": f"echo x > {place.outside}/f"}, ctx)
    assert "Read-only file system" in out.text
    fence = "workspace-write: it may write only the workspace (not .git) and its temporary"
    assert f"ran in the sandbox ({fence}" in out.text
    assert "call run_command again with `outside_sandbox`" in out.text
    out = await run.run({**leaving, "command": f"echo x > {place.outside}/f"}, ctx)
    assert out.raw_output["sandbox"] == "off", out.text
    assert out.raw_output["exitCode"] == 0, out.text
    assert (place.outside / "f").exists()  # asked and allowed: outside the sandbox


# ---------------------------------------------------------------------- over ACP


def spawn(prompt: str) -> dict[str, Any]:
    return {"tool_call": {"name": "spawn_agent", "arguments": {
        "title": "Probe", "description": "Runs the probe.", "prompt": prompt}}}


def command(line: str, **more: Any) -> dict[str, Any]:
    return {"tool_call": {"name": "run_command", "arguments": {"command": line, **more}}}


async def test_a_subagents_command_is_fenced_alike(
    scripted: Scripted, place: Place, checker: Any
) -> None:
    """In auto mode a subagent's command runs in the sandbox, unasked, with the same
    results as the other routes."""
    script = [[spawn("probe")], [command(place.command())], [{"text": "probed"}],
              [{"text": "done"}]]  # fmt: skip
    config = f'[sandbox]\nhide = ["{place.hidden}"]\n'
    agent = scripted(script, "--mode", "auto", config=config)
    async with agent:
        await agent.initialize({"subagents": {}})
        sid = await agent.new_session(str(place.ws))
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
        child = next(u["sessionId"] for u in agent.updates_of(sid, "subagent_update"))
        (call,) = agent.tool_calls(child)
    assert not agent.client_requests  # nothing asked
    assert call["title"].endswith("(sandboxed: workspace-write)")
    assert probed(call["rawOutput"]["output"]) == EXPECTED["workspace-write"]
    place.untouched()


def answers(*kinds: str) -> Any:
    """A permission handler choosing the option of each kind in turn."""
    queue = list(kinds)

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        kind = queue.pop(0)
        option = next(o for o in params["options"] if o["kind"] == kind)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    return handler


async def test_auto_runs_sandboxed_commands_unasked_and_asks_to_leave(
    scripted: Scripted, place: Place
) -> None:
    """auto: a sandboxed command asks nothing; one asking to leave the sandbox asks
    (with its reason, never "always"), and a rejection runs nothing."""
    out = place.outside
    script = [
        [command("echo a > a.txt")],
        [command(f"echo b > {out}/b.txt", outside_sandbox="it writes beside the workspace")],
        [command(f"echo c > {out}/c.txt", outside_sandbox="it writes beside the workspace")],
        [{"text": "done"}],
    ]
    agent = scripted(script, "--mode", "auto")
    agent.handlers["session/request_permission"] = answers("reject_once", "allow_once")
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(str(place.ws))
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
    asked = [r["params"] for r in agent.client_requests]
    assert [q["toolCall"]["title"] for q in asked] == [
        f"Run `echo {x} > {out}/{x}.txt` outside the sandbox (why: it writes beside the "
        "workspace)" for x in "bc"]
    assert {o["kind"] for q in asked for o in q["options"]} == {"allow_once", "reject_once"}
    assert (place.ws / "a.txt").exists() and (out / "c.txt").exists()
    assert not (out / "b.txt").exists()  # rejected: not run


async def test_the_sandbox_option_and_its_errors(scripted: Scripted, place: Place) -> None:
    """`sandbox` is a session option (auto's level; -32602 on a bad value); at read-only
    an auto command cannot write the workspace."""
    agent = scripted([[command("echo a > a.txt")], [{"text": "done"}]], "--mode", "auto")
    async with agent:
        await agent.initialize()
        new = await agent.request("session/new", {"cwd": str(place.ws), "mcpServers": []})
        sid = new["sessionId"]
        assert "auto" in [m["id"] for m in new["modes"]["availableModes"]]
        option = next(o for o in new["configOptions"] if o["id"] == "sandbox")
        assert option["currentValue"] == "workspace-write"
        with pytest.raises(ResponseError) as bad:
            await agent.request("session/set_config_option",
                                {"sessionId": sid, "configId": "sandbox", "value": "loose"})
        assert bad.value.code == -32602
        await agent.request("session/set_config_option",
                            {"sessionId": sid, "configId": "sandbox", "value": "read-only"})
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
        (call,) = agent.tool_calls(sid)
    assert not agent.client_requests
    assert call["title"] == "Run `echo a > a.txt` (sandboxed: read-only)"
    assert call["rawOutput"]["exitCode"] != 0 and not (place.ws / "a.txt").exists()


def sleepers(token: str) -> list[int]:
    """Host pids of processes whose command line holds ``token``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != "Z" and b"sandbox_probe" not in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("how", ["cancel", "agent killed"])
async def test_no_process_survives_a_cancel_or_the_agents_death(
    scripted: Scripted, place: Place, how: str
) -> None:
    """The whole tree inside the sandbox goes: background jobs, their children, even one
    that left the process group (``setsid``: only the PID namespace catches it)."""
    token = f"36{os.getpid() % 100}.{len(how)}17"
    line = (f"sleep {token} & (sleep {token} &) ; setsid sleep {token} & touch started; "
            f"sleep {token}")
    agent = scripted([[command(line)], [{"text": "never"}]], "--mode", "auto")
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(str(place.ws))
        prompt = agent.start_request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        await eventually(lambda: (place.ws / "started").exists() and len(sleepers(token)) >= 4,
                         "the sandboxed command and its background jobs run")
        if how == "cancel":
            await agent.notify("session/cancel", {"sessionId": sid})
            assert (await prompt)["result"]["stopReason"] == "cancelled"
        else:
            agent.kill()
        await eventually(lambda: not sleepers(token), "no process of the command is left")


# ---------------------------------------------------------------------- without a sandbox


def start(tmp_path: Path, *args: str, config: str = "", path: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    """``acp-agent ARGS`` with ``config`` (and ``PATH``), its input at once closed."""
    if config:
        (tmp_path / "c.toml").write_text(config)
        args = (*args, "--config", str(tmp_path / "c.toml"))
    env = agent_env({"PATH": path} if path is not None else {})
    return subprocess.run([sys.executable, "-m", "acp_agent", "--state-dir",
                           str(tmp_path / "state"), *args], input="", text=True,
                          capture_output=True, env=env, timeout=WAIT)  # fmt: skip


def test_what_needs_a_sandbox_that_is_not_there_is_one_line_at_start(tmp_path: Path) -> None:
    """`--mode auto`, a named backend, an `approved` level: without bubblewrap, one line
    naming what to install; a bad level or a missing writable path: one line naming it."""
    nowhere = str(tmp_path / "empty-path")
    for args, config in ((("--mode", "auto"), ""),
                         ((), '[sandbox]\nbackend = "bubblewrap"\n'),
                         ((), '[sandbox]\napproved = "workspace-write"\n')):  # fmt: skip
        result = start(tmp_path, *args, config=config, path=nowhere)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "install the `bubblewrap` package" in (
            result.stderr), result.stderr  # fmt: skip
    for config, named in (('[sandbox]\nlevel = "loose"\n', "sandbox.level"),
                          ('[sandbox]\nwritable = ["/no/such/dir"]\n',
                           "`sandbox.writable`: '/no/such/dir' does not exist")):  # fmt: skip
        result = start(tmp_path, config=config)
        assert result.returncode == 2 and named in result.stderr, result.stderr
    result = start(tmp_path, "--sandbox", "loose")
    assert result.returncode == 2 and "sandbox.level" in result.stderr


async def test_without_a_sandbox_auto_is_not_offered_and_the_user_is_told_once(
    scripted: Scripted, tmp_path: Path, workspace: str
) -> None:
    """No backend: no auto, no sandbox option; a command in plan mode is asked for as
    one that must change nothing (no fence holds it: here refused, nothing runs); a
    configured sandbox level is told to be impossible once (not per session)."""
    agent = scripted([[command("touch x")], [{"text": "planned"}]], "--sandbox", "read-only",
                     PATH=str(tmp_path / "empty-path"))  # fmt: skip
    agent.handlers["session/request_permission"] = answers("reject_once")
    async with agent:
        await agent.initialize({"session": {"notices": {}}})
        new = await agent.request("session/new", {"cwd": workspace, "mcpServers": []})
        second = await agent.new_session(workspace)
        assert "auto" not in [m["id"] for m in new["modes"]["availableModes"]]
        assert "sandbox" not in [o["id"] for o in new["configOptions"]]
        with pytest.raises(ResponseError) as refused:
            await agent.request("session/set_mode",
                                {"sessionId": second, "modeId": "auto"})  # fmt: skip
        assert refused.value.code == -32602 and "bubblewrap" in str(refused.value.message)
        await agent.request("session/set_mode", {"sessionId": second, "modeId": "plan"})
        assert (await agent.prompt(second, "go"))["stopReason"] == "end_turn"
        await agent.wait_for(lambda: bool(agent.updates_of(new["sessionId"], "notice")))
        told = [n for s in (new["sessionId"], second) for n in agent.updates_of(s, "notice")]
    assert [n["title"] for n in told] == ["Commands are not sandboxed"]
    assert "install the `bubblewrap` package" in told[0]["description"]
    (call,) = agent.tool_calls(second)
    assert call["status"] == "failed" and not (Path(workspace) / "x").exists()
    (question,) = [r["params"]["toolCall"]["title"] for r in agent.client_requests]
    assert question == "Run `touch x` (plan mode: allow it only if it changes nothing)"


async def test_approved_commands_run_at_the_approved_level(
    scripted: Scripted, place: Place
) -> None:
    """In ask mode `[sandbox] approved` fences what the user approves; bypass never."""
    for mode, level, asks in (("ask", "read-only", 1), ("bypass", "off", 0)):
        agent = scripted([[command(f"echo x > {mode}.txt")], [{"text": "done"}]],
                         "--mode", mode, config='[sandbox]\napproved = "read-only"\n')  # fmt: skip
        async with agent:
            await agent.initialize()
            sid = await agent.new_session(str(place.ws))
            assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
            (call,) = agent.tool_calls(sid)
        assert len(agent.client_requests) == asks
        assert call["rawOutput"]["sandbox"] == level
        assert (place.ws / f"{mode}.txt").exists() == (level == "off")


def test_the_terminal_shows_the_sandbox_level(tmp_path: Path, workspace: str) -> None:
    """`acp-agent chat` names auto's sandbox level on its first line and under /mode."""
    result = subprocess.run(
        [sys.executable, "-m", "acp_agent", "chat", "--sandbox", "read-only", "--state-dir",
         str(tmp_path / "state"), "--cwd", workspace],
        input="/mode\n", text=True, capture_output=True, env=agent_env({"NO_COLOR": "1"}),
        timeout=WAIT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert "sandbox read-only ·" in shown and "sandbox of auto's commands: read-only" in shown
    assert " auto " in shown


async def test_always_for_a_sandboxed_command_never_covers_it_unsandboxed(
    scripted: Scripted, place: Place
) -> None:
    """"Always" given to a command run read-only (ask mode, ``approved = "read-only"``)
    names the level and covers it there only: the same command run unsandboxed (auto mode
    at the ``off`` level, which asks) asks again."""
    script = [[command("echo x")], [{"text": "one"}], [command("echo x")], [{"text": "two"}],
              [command("echo x")], [{"text": "three"}]]  # fmt: skip
    agent = scripted(script, config='[sandbox]\napproved = "read-only"\n')
    agent.handlers["session/request_permission"] = answers("allow_always", "allow_once")
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(str(place.ws))
        await agent.prompt(sid, "go")
        await agent.prompt(sid, "again")  # remembered: not asked
        await agent.request("session/set_config_option",
                            {"sessionId": sid, "configId": "sandbox", "value": "off"})
        await agent.request("session/set_mode", {"sessionId": sid, "modeId": "auto"})
        await agent.prompt(sid, "and unsandboxed")
    asked = [r["params"] for r in agent.client_requests]
    assert [q["toolCall"]["title"] for q in asked] == [
        "Run `echo x` (sandboxed: read-only)", "Run `echo x`"]
    always = next(o["name"] for o in asked[0]["options"] if o["kind"] == "allow_always")
    assert always == "Always allow `echo x` (sandboxed: read-only)"




def test_nested_repositories_are_found_without_following_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_agent.tools import sandbox

    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    for d in (root / ".git", root / "a" / "b" / ".git", root / "c", elsewhere / ".git"):
        d.mkdir(parents=True)
    (root / "c" / ".git").write_text("gitdir: ../.git/worktrees/c\n")  # a worktree's file
    (root / "link").symlink_to(elsewhere)  # not followed: outside the root anyway
    found = sandbox.nested_git(str(root))
    assert sorted(found) == [str(root / "a" / "b" / ".git"), str(root / "c" / ".git")]
    (root / "d" / ".git").mkdir(parents=True)  # created later: the creator's own
    assert sandbox.nested_git(str(root)) == found
    assert len(sandbox._walk_for_git(str(root))) == 3  # a walk now sees it
    monkeypatch.setattr(sandbox, "NESTED_GIT_WALK", 1)
    assert sandbox._walk_for_git(str(root)) == []  # bounded: the root's entries only
