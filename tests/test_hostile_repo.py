"""Issue 23, items 1-4: a hostile repository gets nothing. Opening, prompting and
compacting run none of the programs its git configuration names; its instruction and
command files are read only inside the roots; names it (or the model) chose are shown
escaped; and no child the agent starts gets a variable that looks like a secret."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from rich.console import Console

from acp_agent.config import from_mapping
from acp_agent.engine.childenv import child_environ
from acp_agent.engine.gitstate import state
from acp_agent.engine.projectfiles import ProjectText, Refused, read_project_text
from acp_agent.human import Renderer
from acp_agent.human._rich import RichView
from acp_agent.protocol import types as t

from .engine_world import World
from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text
from .fakes.provider import calls, text
from .harness import AgentProcess, Scripted
from .limits import WAIT
from .schema_check import SchemaChecker

GIT = shutil.which("git") or "git"
SECRET = "TOP SECRET key material"
NOTICES: dict[str, Any] = {"session": {"notices": {}}}

#: Variables that look like secrets, as a user's shell has them.
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret", "GITHUB_TOKEN": "ghp_token", "GH_TOKEN": "gh-token",
    "NPM_TOKEN": "npm-token", "DB_PASSWORD": "db-pass", "smtp_passwd": "smtp-pass",
    "GOOGLE_APPLICATION_CREDENTIALS": "/creds.json", "SSH_PRIVATE_KEY": "ssh-key",
    "STRIPE_SECRET": "stripe", "APP_SECRET_VALUE": "app-secret", "MISTRAL_API_KEY": "mistral",
    "OPENAI_API_KEY": "sk-openai-key-value", "COPIED": "sk-openai-key-value",
}  # fmt: skip
ORDINARY = {"LANG": "C.UTF-8", "PROJECT_SETTING": "on", "TOKENIZER": "bpe"}


def git(*args: str, cwd: Path) -> None:
    subprocess.run([GIT, "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                   check=True, capture_output=True)  # fmt: skip


def hostile_repo(base: Path, marker: Path) -> Path:
    """A repository whose git configuration names a program for everything git can run
    on its own: fsmonitor, every hook, filters (by .gitattributes and info/attributes),
    a pager, an external diff, an alias; its files stale, so that a status re-reads them."""
    repo = base / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "one", cwd=repo)
    evil = base / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho \"ran: $0 $*\" >> {marker}\ncat\n")
    evil.chmod(0o755)
    hooks = base / "hooks"
    hooks.mkdir()
    for name in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction",
                 "pre-auto-gc", "fsmonitor-watchman"):  # fmt: skip
        for where in (hooks, repo / ".git" / "hooks"):
            shutil.copy(evil, where / name)
    for key, value in (
        ("core.fsmonitor", str(evil)), ("core.hooksPath", str(hooks)), ("core.pager", str(evil)),
        ("diff.external", str(evil)), ("diff.evil.textconv", str(evil)),
        ("filter.evil.clean", str(evil)), ("filter.evil.smudge", str(evil)),
        ("filter.evil.process", str(evil)), ("alias.st", f"!{evil}"),
    ):  # fmt: skip
        git("config", key, value, cwd=repo)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    (repo / "a.txt").write_text("changed\n")
    os.utime(repo / "a.txt", (0, 0))  # stale stat data: git must read (filter) the file
    (repo / "new.txt").write_text("untracked\n")
    return repo


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def openai_agent(checker: SchemaChecker, state_dir: str, server: FakeLLMServer,
                 env: dict[str, str] | None = None) -> AgentProcess:
    return AgentProcess(checker, "--state-dir", state_dir, "--model", "openai:gpt-4.1",
                        "--base-url", server.openai_url,
                        env={"OPENAI_API_KEY": "k", **(env or {})})  # fmt: skip


def sent(server: FakeLLMServer) -> str:
    """Every model request's body, as one text."""
    return "\n".join(json.dumps(r.body) for r in server.requests)


# ---------------------------------------------------------------------- 1: git runs nothing


async def test_opening_prompting_and_compacting_run_nothing_the_repository_configured(
    checker: SchemaChecker, state_dir: str, tmp_path: Path, server: FakeLLMServer
) -> None:
    """fsmonitor, hooks, filters, pager, external diff: none runs on session/new, a
    prompt or a compaction; the environment block still says the branch and the state."""
    marker = tmp_path / "ran"
    repo = hostile_repo(tmp_path, marker)
    server.enqueue(Reply([Text("ok"), Finish("stop")]), Reply([Text("summary"), Finish("stop")]))
    async with openai_agent(checker, state_dir, server) as agent:
        await agent.initialize()
        sid = await agent.new_session(str(repo))
        await agent.prompt(sid, "hi")
        await agent.prompt(sid, "/compact")
    assert len(server.requests) == 2  # the prompt and the compaction's summary
    system = server.requests[0].body["messages"][0]["content"]
    assert "Git: a repository on branch main, 2 uncommitted change(s)" in system
    assert not marker.exists(), marker.read_text()


def test_git_gets_the_commands_environment_and_never_the_projects_own_git(
    tmp_path: Path,
) -> None:
    """The git that runs is found on PATH's absolute entries only (a `./git` in the
    project never runs), with the environment given: here, one recording what it got."""
    marker = tmp_path / "ran"
    repo = hostile_repo(tmp_path, marker)
    fake = repo / "git"
    fake.write_text(f"#!/bin/sh\necho project-git >> {marker}\n")
    fake.chmod(0o755)
    record = tmp_path / "bin"
    record.mkdir()
    (record / "git").write_text(f"#!/bin/sh\nenv > {tmp_path / 'env'}\nexec {GIT} \"$@\"\n")
    (record / "git").chmod(0o755)
    env = child_environ(from_mapping({}), {**SECRETS, "PATH": f".:{record}:{os.defpath}"})
    assert state(str(repo), str(repo), env).startswith("a repository on branch main, 3 ")
    seen = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines()
                if "=" in line)  # fmt: skip
    assert not set(SECRETS) & set(seen)
    assert seen["GIT_ALLOW_PROTOCOL"] == "none"
    assert not marker.exists(), marker.read_text()


def test_the_branch_is_read_without_git(tmp_path: Path) -> None:
    """HEAD is read directly (a worktree's `.git` file followed); with no git installed
    the state is said to be unknown."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "trunk", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=repo)
    git("worktree", "add", "-q", "--detach", str(tmp_path / "wt"), cwd=repo)
    no_git = {"PATH": str(tmp_path / "nowhere")}
    assert state(str(repo), str(repo), no_git) == (
        "a repository on branch trunk (git is not installed: its state is unknown)")
    detached = state(str(tmp_path / "wt"), str(tmp_path / "wt"), {"PATH": os.defpath})
    assert detached.startswith("a repository on a detached HEAD at ")
    assert detached.endswith(", clean at the start of the session")


# ---------------------------------------------------------------------- 2: files read in roots


def test_a_project_file_is_read_only_where_it_may_be(tmp_path: Path) -> None:
    """Inside the places given, symlinks resolved; regular files only (a FIFO never
    blocks); text only; bounded."""
    roots = tmp_path / "ws"
    roots.mkdir()
    (tmp_path / "secret").write_text(SECRET)
    (roots / "ok.md").write_text("fine")
    (roots / "inner.md").symlink_to(roots / "ok.md")
    (roots / "out.md").symlink_to(tmp_path / "secret")
    (roots / "dangling.md").symlink_to(tmp_path / "gone")
    os.mkfifo(roots / "fifo.md")
    (roots / "bin.md").write_bytes(b"text\0more")
    (roots / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (roots / "big.md").write_text("é" * 100)
    allowed = [str(roots)]

    def read(name: str, **kw: Any) -> ProjectText | Refused:
        return read_project_text(str(roots / name), allowed, **kw)

    assert read("ok.md") == ProjectText(str(roots / "ok.md"), "fine")
    assert read("inner.md") == ProjectText(str(roots / "inner.md"), "fine")
    for name, why in (("out.md", f"it leads to {tmp_path / 'secret'}, outside the session's "
                                 "roots"),
                      ("dangling.md", f"it leads to {tmp_path / 'gone'}, outside"),
                      ("fifo.md", "it is not a regular file"),
                      ("bin.md", "it is a binary file"),
                      ("latin1.md", "it is not UTF-8 text")):  # fmt: skip
        refused = read(name)
        assert isinstance(refused, Refused) and refused.reason.startswith(why), refused
    assert read("big.md", max_bytes=51) == ProjectText(str(roots / "big.md"), "é" * 25, cut=True)
    # a file itself as the place: exactly it, never where a link from it leads
    assert read_project_text(str(roots / "ok.md"), [str(roots / "ok.md")]).text == "fine"  # type: ignore[union-attr]
    assert isinstance(read_project_text(str(roots / "inner.md"), [str(roots / "inner.md")]),
                      Refused)  # fmt: skip


def test_a_command_files_description_is_shown_escaped(tmp_path: Path) -> None:
    from acp_agent.handlers.commands import load_prompt_commands

    commands = tmp_path / ".acp-agent" / "commands"
    commands.mkdir(parents=True)
    (commands / "x.md").write_text(
        "---\ndescription: a\x1b[2Jb\u202e\nargument-hint: c\x07\n---\nDo.")
    (found,) = load_prompt_commands(str(tmp_path), env={}).values()
    assert (found.description, found.hint) == ("a\\x1b[2Jb\\u202e", "c\\x07")


def linked_project(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace whose instruction and command files all link to a secret outside."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / ".acp-agent" / "commands").mkdir(parents=True)
    outside.mkdir()
    (outside / "id_rsa").write_text(SECRET)
    (ws / "AGENTS.md").symlink_to(outside / "id_rsa")
    (ws / ".acp-agent" / "instructions.md").symlink_to(outside / "id_rsa")
    (ws / ".acp-agent" / "commands" / "leak.md").symlink_to(outside / "id_rsa")
    (ws / ".acp-agent" / "commands" / "fine.md").write_text("Say hello.\n")
    return ws, outside


@pytest.mark.parametrize("caps", [NOTICES, {}], ids=["notices", "messages"])
async def test_linked_instruction_and_command_files_never_reach_the_model(
    checker: SchemaChecker, state_dir: str, tmp_path: Path, server: FakeLLMServer,
    caps: dict[str, Any],
) -> None:
    """`AGENTS.md -> ~/.ssh/id_rsa` and its kind: skipped, the user told which file and
    why (a notice, or an agent message without notices), nothing of it in any request."""
    ws, outside = linked_project(tmp_path)
    for _ in range(3):
        server.enqueue(Reply([Text("ok"), Finish("stop")]))
    async with openai_agent(checker, state_dir, server) as agent:
        await agent.initialize(caps)
        sid = await agent.new_session(str(ws))
        await agent.prompt(sid, "/leak")
        await agent.prompt(sid, "/fine")
        await agent.prompt(sid, "hi")
        if caps:
            told = [f"{u['title']}: {u.get('description', '')}"
                    for u in agent.updates_of(sid, "notice")]  # fmt: skip
        else:
            told = ["".join(u["content"]["text"]
                            for u in agent.updates_of(sid, "agent_message_chunk"))]  # fmt: skip
    assert SECRET not in sent(server)
    assert "Say hello." in sent(server)  # a file inside the roots is read
    said = "\n".join(told)
    reason = f"it leads to {outside / 'id_rsa'}, outside the session's roots"
    for path in (ws / "AGENTS.md", ws / ".acp-agent" / "instructions.md",
                 ws / ".acp-agent" / "commands" / "leak.md"):  # fmt: skip
        assert f"{path}: {reason}" in said
    assert said.count("instructions.md") == 1  # once, though the prompt is built twice


# ---------------------------------------------------------------------- 3: shown escaped

HOSTILE = {
    "ok.txt\nAllow? yes": "ok.txt\\nAllow? yes",
    "invoice\u202etxt.sh": "invoice\\u202etxt.sh",
    "a\x1b[2Jb.txt": "a\\x1b[2Jb.txt",
}


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_names_are_escaped_in_titles_locations_and_questions(
    tmp_path: Path, name: str
) -> None:
    """The question, its "always" option, the announced call and its locations show the
    name escaped; the file written is the one named."""
    world = World(tmp_path, calls(("write_file", {"path": name, "content": "x"}),
                                  ("run_command", {"command": f"cat '{name}'"})),
                  text("done"), answers=["allow_once", "reject_once"])  # fmt: skip
    await world.turn()
    shown = HOSTILE[name]
    asked = [str(q.title) for q in world.editor.asked]
    assert asked[0] == f"Write {shown}" and name not in asked[1]
    assert asked[1] == f"Run `cat '{shown}'`" or "\n" in name  # (cut at a line break)
    assert world.editor.offered[1][1].name == f"Always allow `cat '{shown}'`"
    titles = [u.title for u in world.emitted(t.ToolCall)]
    paths = [loc.path for u in world.emitted(t.ToolCall) for loc in u.locations or []]
    assert titles == asked and paths == [str(tmp_path / shown)]
    assert (tmp_path / name).read_text() == "x"


def test_the_terminal_front_end_shows_titles_and_notices_escaped() -> None:
    """Whatever an agent sends: titles, questions and their options, notices, plans,
    diffs' paths, message text and command previews are shown escaped, by the plain and
    the rich renderer alike."""
    for name, shown in HOSTILE.items():
        out = io.StringIO()
        r = Renderer(out)
        dec = msgspec.json.Decoder(t.SessionNotification)
        updates = [
            {"sessionUpdate": "tool_call", "toolCallId": "c", "title": f"Write {name}",
             "status": "completed"},
            {"sessionUpdate": "notice", "severity": "warning", "title": name,
             "description": f"about {name}"},
            {"sessionUpdate": "plan", "entries": [{"content": f"edit {name}",
                                                   "priority": "high", "status": "pending"}]},
            {"sessionUpdate": "tool_call", "toolCallId": "d", "title": "Write a file",
             "status": "completed", "content": [{"type": "diff", "path": f"/w/{name}",
                                                 "oldText": "a\n", "newText": "b\n"}]},
        ]  # fmt: skip
        if "\n" not in name:  # text keeps its line breaks: the rest is escaped in it too
            updates.append({"sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": f"I wrote {name}."}})  # fmt: skip
        console = Console(file=io.StringIO(), width=200, color_system=None)
        rich = RichView(console)
        for update in updates:
            decoded = dec.decode(json.dumps({"sessionId": "s", "update": update})).update
            r.update(decoded)
            rich.update(decoded)
        rich.finish(t.PromptResponse(stop_reason="end_turn"))
        r.finish(t.PromptResponse(stop_reason="end_turn"))
        req = t.RequestPermissionRequest(session_id="s", options=[], tool_call=t.ToolCallUpdate(
            tool_call_id="c", title=f"Write {name}", raw_input={"command": f"cat {name}"}))
        r.err = io.StringIO()
        r.question(req, [("a", "Allow once"), ("A", f"Always allow writing {name}")])
        asked = Console(file=io.StringIO(), width=200, color_system=None)
        RichView(asked).question(req, [("a", "Allow once"), ("A", f"Always allow writing {name}")])
        screens = [out.getvalue(), r.err.getvalue(), asked.file.getvalue(),  # type: ignore[attr-defined]
                   console.file.getvalue()]  # type: ignore[attr-defined]  # fmt: skip
        for screen in screens:
            assert name not in screen and shown in screen, screen
        assert screens[0].count(shown) >= 5 - ("\n" in name)  # title, notice, plan, diff, text
        assert f"Always allow writing {shown}" in screens[1] and shown in screens[2]
        if "\n" not in name:  # a command keeps its line breaks in the preview
            assert f"$ cat {shown}" in screens[2]


# ---------------------------------------------------------------------- 4: no secrets


def test_secret_looking_variables_are_removed_by_pattern() -> None:
    """Every listed pattern, case-insensitively, and a copy of a key's value; `keep-env`
    still lets a named one through; ordinary variables pass."""
    config = from_mapping({"keep-env": ["NPM_TOKEN"]})
    env = child_environ(config, {**SECRETS, **ORDINARY})
    assert env == {**ORDINARY, "NPM_TOKEN": "npm-token"}


async def test_a_commands_environment_has_no_secrets(tmp_path: Path) -> None:
    world = World(tmp_path, calls(("run_command", {"command": "env > env.txt"})), text("ok"))
    world.env = child_environ(from_mapping({}), {**os.environ, **SECRETS, **ORDINARY})
    await world.turn()
    seen = (tmp_path / "env.txt").read_text()
    assert "PROJECT_SETTING=on" in seen
    assert not [name for name in SECRETS if f"\n{name}=" in f"\n{seen}"]


async def test_an_mcp_server_and_a_subagents_command_get_no_secrets(
    scripted: Scripted, tmp_path: Path
) -> None:
    """Over ACP: a command a subagent runs gets the commands' environment (ordinary
    variables) and none of the variables that look like secrets; a stdio MCP server the
    agent starts, its small base through the same filter and the editor's own."""
    from .mcp.conftest import DEMO

    ws = tmp_path / "ws"
    ws.mkdir()
    dump = f"{sys.executable} -c \"import os, json; print(json.dumps(dict(os.environ)))\""
    script = [
        [{"tool_call": {"name": "mcp__demo__getenv", "arguments": {"name": name}}}
         for name in [*SECRETS, "LANG", "EDITOR_GIVEN"]],
        [{"tool_call": {"name": "spawn_agent", "arguments": {
            "title": "Env", "description": "Prints it.", "prompt": "print the env"}}}],
        [{"tool_call": {"name": "run_command", "arguments": {"command": f"{dump} > env.json"}}}],
        [{"text": "printed"}],
        [{"text": "done"}],
    ]  # fmt: skip
    wait = f"[limits]\nmcp-start-timeout = {WAIT}\n"  # the first request waits for the server
    agent = scripted(script, "--mode", "bypass", config=wait, **SECRETS, **ORDINARY)
    async with agent:
        await agent.initialize()
        server = {"name": "demo", "command": sys.executable, "args": [str(DEMO)],
                  "env": [{"name": "EDITOR_GIVEN", "value": "yes"}]}  # fmt: skip
        sid = await agent.new_session(str(ws), mcpServers=[server])
        assert (await agent.prompt(sid, "go"))["stopReason"] == "end_turn"
        texts = {c["rawInput"]["name"]: json.dumps(c.get("content"))
                 for c in agent.tool_calls(sid) if "name" in c["rawInput"]}  # fmt: skip
    assert "yes" in texts["EDITOR_GIVEN"] and "C.UTF-8" in texts["LANG"]
    for name, value in SECRETS.items():
        assert value not in texts[name], (name, texts[name])
    child_env = json.loads((ws / "env.json").read_text())
    assert child_env["PROJECT_SETTING"] == "on"
    assert not set(SECRETS) & set(child_env)
