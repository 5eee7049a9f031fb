"""The everyday tools on every provider route, through the real SDKs against the fake:
a grep that skips what .gitignore ignores, a command whose long output keeps its head and
tail and is saved whole, an AGENTS.md below the workspace attached to the first result
under it, and the environment naming the shell commands run in."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acp_agent.tools.usershell import choose

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .harness import agent_env
from .routes import ROUTES, Route
from .schema_check import SchemaChecker


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def call(call_id: str, name: str, **arguments: object) -> Reply:
    return Reply([ToolCall(call_id, name, json.dumps(arguments)), Finish("tool_calls")])


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
async def test_the_everyday_tools(
    route: Route, checker: SchemaChecker, state_dir: str, workspace: str,
    server: FakeLLMServer, tmp_path: Path,
) -> None:  # fmt: skip
    ws = Path(workspace)
    subprocess.run(["git", "init", "-q", workspace], check=True)
    (ws / ".gitignore").write_text("venv/\n")
    for rel in ("src/calc.py", "venv/lib/site.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("def add(a, b):\n    return a + b\n")
    (ws / "src" / "AGENTS.md").write_text("Src rules: keep functions pure.\n")
    server.enqueue(
        call("c1", "grep", pattern="def add"),
        call("c2", "run_command", command="echo FIRST; seq 1 100000; echo LAST"),
        call("c3", "read_file", path="src/calc.py"),
        Reply([Text("done"), Finish("stop")]),
    )
    async with route.agent(checker, state_dir, server, tmp_path, "--mode", "bypass") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "look around"))["stopReason"] == "end_turn"
        last = server.requests[-1].body
        grep, command, read = route.tool_results(last)
        assert grep == "src/calc.py:1: def add(a, b):"
        assert command.startswith("FIRST\n1\n2\n")
        assert command.endswith("100000\nLAST\n\nExit code: 0")
        saved = re.search(r"All of it is saved in (\S+): read_file it", command)
        assert saved is not None
        assert Path(saved.group(1)).read_text().splitlines()[-1] == "LAST"
        assert Path(saved.group(1)).is_relative_to(Path(state_dir) / "outputs" / sid)
        await agent.request("session/delete", {"sessionId": sid})
        assert not (Path(state_dir) / "outputs" / sid).exists()  # deleted with the session
    assert "<system-reminder>Instructions from src/AGENTS.md" in read
    assert "Src rules: keep functions pure." in read
    shell = choose(agent_env()).path
    assert (f"- Shell: commands run as `{shell} -c <command>`" in route.system(last))


async def test_commands_get_the_login_shells_environment_without_its_secrets(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    """What the profile exports is there (read once per session); secrets it exports are
    filtered out as the agent's own are."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(
        "export FROM_PROFILE=yes\nexport MY_API_KEY=s3cr3t-value\nexport COUNT=$((COUNT+1))\n")
    server.enqueue(call("c1", "run_command", command="echo $FROM_PROFILE ${MY_API_KEY:-none}"),
                   call("c2", "run_command", command="echo count=$COUNT; [[ -n $BASH ]] && echo"
                                                     " bash"),
                   Reply([Text("done"), Finish("stop")]))  # fmt: skip
    env = {"HOME": str(home), "SHELL": "/bin/bash", "COUNT": "0"}
    async with ROUTES[0].agent(checker, state_dir, server, tmp_path, "--mode", "bypass",
                               env=env) as agent:  # fmt: skip
        await agent.initialize()
        await agent.prompt(await agent.new_session(workspace), "check")
    first, second = ROUTES[0].tool_results(server.requests[-1].body)
    assert first == "yes none\n\nExit code: 0"
    assert second == "count=1\nbash\n\nExit code: 0"  # the profile ran once
    system = ROUTES[0].system(server.requests[0].body)
    assert ("- Shell: commands run as `/bin/bash -c <command>` (your $SHELL), with the "
            "environment of your login shell (`/bin/bash -l`), read once when the first "
            "command runs") in system
