"""The command line as scripts and shells use it, through real processes: the prompt from
words and stdin, flags before or after the command, stdout for the answer alone, exit
statuses, `sessions`, `permissions`, `doctor`, each mistake's message, `/model`, and
`--debug`'s request log."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from .fakes.llm_server import FakeLLMServer, Reply
from .fakes.llm_wire import Finish, Text, Usage
from .harness import agent_env
from .limits import WAIT
from .test_cli import acp


def prompts(state_dir: str) -> list[str]:
    """The prompts the sessions in ``state_dir`` were sent, in order."""
    found = []
    for log in sorted(Path(state_dir, "sessions").glob("*.jsonl"), key=os.path.getmtime):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("r") == "prompt":
                found.append("".join(b.get("text", "") for b in record["blocks"]))
    return found


def script(tmp_path: Path, *responses: list[dict[str, object]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(list(responses)))
    return str(path)


# ------------------------------------------------------------------ the prompt


@pytest.mark.parametrize(("args", "stdin", "sent"), [
    (["read", "hello.txt"], "", "read hello.txt"),  # words joined
    ([], "read hello.txt\n", "read hello.txt"),  # no words, stdin piped
    (["-"], "list\n", "list"),  # `-`: stdin
    (["summarise", "this"], "a\nb\n", "summarise this\n\n<stdin>\na\nb\n</stdin>"),  # context
])
def test_the_prompt_is_the_words_or_stdin_or_both(
    state_dir: str, workspace: str, args: list[str], stdin: str, sent: str,
) -> None:
    result = acp("run", *args, "--save", "--state-dir", state_dir, "--cwd", workspace,
                 stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert prompts(state_dir) == [sent]


def test_no_prompt_at_all_is_a_mistake(state_dir: str) -> None:
    result = acp("run", "--state-dir", state_dir, stdin="")
    assert (result.returncode, result.stderr) == (2, "acp-agent: run: the prompt is empty\n")


def test_flags_go_before_or_after_the_command(state_dir: str, workspace: str) -> None:
    before = acp("--state-dir", state_dir, "--mode", "plan", "chat", "--cwd", workspace,
                 stdin="/mode\nhello\n")
    assert before.returncode == 0, before.stderr
    assert "● plan" in before.stderr  # --mode reached the agent
    after = acp("run", "hello", "--state-dir", state_dir, "--cwd", workspace, "--save")
    assert after.returncode == 0, after.stderr
    assert prompts(state_dir)[-1] == "hello"
    typo = acp("--state-dir", state_dir, "chta")
    assert (typo.returncode, typo.stderr) == (2, "acp-agent: 'chta' is not a command; did you"
                                              " mean `chat`? (commands: run, chat, sessions,"
                                              " permissions, doctor, serve, login, logout;"
                                              " acp-agent --help)\n")


def test_stdout_is_the_answer_alone(state_dir: str, workspace: str, tmp_path: Path) -> None:
    env = {"ACP_AGENT_OFFLINE_SCRIPT": script(tmp_path, [
        {"thinking": "let me see"}, {"text": "First part."},
        {"tool_call": {"name": "read_file", "arguments": {"path": "hello.txt"}}},
    ], [{"text": "Second part.\n"}])}
    result = acp("run", "go", "--state-dir", state_dir, "--cwd", workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "First part.\n\nSecond part.\n"
    assert result.stderr.splitlines()[:2] == ["let me see", "✓ Read hello.txt"]
    assert result.stderr.splitlines()[-1].startswith("— stop: end_turn · tokens: ")


@pytest.mark.parametrize(("finish", "status"), [
    ("stop", 0), ("length", 3), ("refusal", 5),
])
def test_the_exit_status_says_how_the_turn_ended(
    state_dir: str, tmp_path: Path, finish: str, status: int,
) -> None:
    env = {"ACP_AGENT_OFFLINE_SCRIPT": script(tmp_path, [{"text": "hi"}, {"finish": finish}])}
    result = acp("run", "go", "--state-dir", state_dir, env=env)
    assert result.returncode == status, result.stderr


def test_a_turn_out_of_requests_exits_4(state_dir: str, tmp_path: Path) -> None:
    (tmp_path / "one.toml").write_text("[limits]\nmax-turn-requests = 1\n")
    call: dict[str, object] = {"tool_call": {"name": "list_directory", "arguments": {}}}
    env = {"ACP_AGENT_OFFLINE_SCRIPT": script(tmp_path, [call], [call])}
    result = acp("run", "go", "--config", str(tmp_path / "one.toml"), "--state-dir", state_dir,
                 env=env)
    assert result.returncode == 4, result.stderr
    assert "stop: max_turn_requests" in result.stderr


# ------------------------------------------------------------------ sessions


def test_sessions_lists_this_directory_or_every_one(state_dir: str, tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    assert acp("chat", "--state-dir", state_dir, stdin="hello\nlist\n", cwd=str(here)
               ).returncode == 0
    assert acp("run", "hello", "--save", "--state-dir", state_dir, cwd=str(there)
               ).returncode == 0
    mine = acp("sessions", "--state-dir", state_dir, cwd=str(here))
    assert mine.returncode == 0, mine.stderr
    head, row = mine.stdout.splitlines()
    assert head.split() == ["ID", "LAST", "ACTIVITY", "TURNS", "TITLE"]
    assert re.fullmatch(r"sess_\w+\s+just now\s+2\s+hello", row), row
    assert mine.stderr == "resume one: acp-agent chat --resume ID\n"
    every = acp("--state-dir", state_dir, "sessions", "--all", cwd=str(here))
    rows = every.stdout.splitlines()[1:]
    assert sorted(row.split()[-2] for row in rows) == [str(here), str(there)]
    assert {row.split()[3] for row in rows} == {"1", "2"}
    empty = acp("sessions", "--state-dir", state_dir, cwd=str(tmp_path))
    assert (empty.returncode, empty.stdout) == (0, "")
    assert empty.stderr == (f"no saved sessions in {tmp_path} (acp-agent sessions --all lists"
                            " every directory's)\n")


def test_a_piped_chat_continues_where_it_left_off(state_dir: str, workspace: str) -> None:
    first = acp("chat", "--state-dir", state_dir, "--cwd", workspace, stdin="read hello.txt\n")
    (sid,) = re.findall(r"saved as (sess_\w+)", first.stderr)
    again = acp("chat", "--continue", "--state-dir", state_dir, "--cwd", workspace,
                stdin="list\n")
    assert again.returncode == 0, again.stderr
    assert f"resumed: read hello.txt ({sid})" in again.stderr
    assert "> read hello.txt\n" in again.stderr  # the last exchanges, shown on stderr
    assert again.stdout == "`list_directory` worked; its output is shown above.\n"  # new only
    assert prompts(state_dir) == ["read hello.txt", "list"]
    picked = acp("chat", "--resume", "--state-dir", state_dir, "--cwd", workspace, stdin="")
    assert (picked.returncode, picked.stderr.splitlines()[-1]) == (
        2, "acp-agent: --resume without an id needs a terminal to pick on; give the id"
        " (acp-agent sessions lists them)")
    by_prefix = acp("chat", "--resume", sid[:9], "--state-dir", state_dir, stdin="")
    assert by_prefix.returncode == 0 and f"resumed: read hello.txt ({sid})" in by_prefix.stderr


# ------------------------------------------------------------------ permissions


def test_permissions_are_listed_and_forgotten(state_dir: str, workspace: str) -> None:
    where = ("--state-dir", state_dir, "--cwd", workspace)
    assert acp("run", "write notes.txt hi", "--allow-always", *where).returncode == 0
    assert acp("run", "run echo hi", "--allow-always", *where).returncode == 0
    listed = acp("permissions", "--state-dir", state_dir, cwd=workspace)
    assert listed.stdout == (f"{workspace}\n  1  allow   `echo hi`\n"
                             "  2  allow   edits in the workspace\n")
    assert listed.stderr == "acp-agent permissions forget N (or --all) takes them back\n"
    every = acp("permissions", "--all", "--state-dir", state_dir)
    assert every.stdout == listed.stdout
    wrong = acp("permissions", "forget", "9", *where)
    assert (wrong.returncode, wrong.stderr) == (
        2, "acp-agent: permissions forget: no rule '9' (the list numbers them; `all` forgets"
        " every one)\n")
    gone = acp("permissions", "forget", "`echo hi`", *where)  # a rule as listed
    assert gone.returncode == 0, gone.stderr
    # the command asks again (and nobody can be asked here); the edits still need not
    asked = acp("run", "run echo hi", *where)
    assert "✗ Run `echo hi`\n  Not run: permission could not be asked" in asked.stderr
    edited = acp("run", "write notes.txt again", *where)
    assert "✓ Write notes.txt" in edited.stderr
    assert acp("permissions", "forget", "--all", *where).returncode == 0
    assert acp("permissions", *where).stderr == (
        f"no remembered answers for {workspace}: every call that asks, asks\n")


def test_permissions_in_a_chat(state_dir: str, workspace: str) -> None:
    where = ("--state-dir", state_dir, "--cwd", workspace)
    assert acp("run", "write notes.txt hi", "--allow-always", *where).returncode == 0
    chat = acp("chat", *where, stdin="/permissions\n/permissions forget 1\n/permissions\n")
    assert chat.returncode == 0, chat.stderr
    assert "1  allow   edits in the workspace" in chat.stdout
    assert "Forgotten (1): the next such call asks again." in chat.stdout
    assert f"No remembered answers for {workspace}" in chat.stdout
    assert "— stop" not in chat.stderr  # answered by the agent itself: no footer


# ------------------------------------------------------------------ /model


def test_model_takes_any_spec_and_checks_its_key_first(state_dir: str, workspace: str) -> None:
    chat = acp("chat", "--state-dir", state_dir, "--cwd", workspace,
               stdin="/model openai:gpt-4o-mini\n/model anthropic\n/model ollama:llama3\n")
    assert chat.returncode == 0, chat.stderr
    said = chat.stdout
    assert ("`openai:gpt-4o-mini` needs an API key: run `acp-agent login --provider openai` in"
            " a terminal (or set OPENAI_API_KEY where the agent starts), then `/model"
            " openai:gpt-4o-mini` again. The model stays **offline**.") in said
    assert "`anthropic` names no model: write `anthropic:<model>`." in said
    assert "Model: **ollama:llama3** (configured: offline; any `<provider>:<model>` works)." \
        in said


# ------------------------------------------------------------------ doctor


def test_doctor_says_all_is_well_in_one_line_each(state_dir: str, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "OPENAI_API_KEY": "sk-never-shown"}
    result = acp("doctor", "--state-dir", state_dir, env=env)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert all(re.match(r"(ok  |note)  \S", line) for line in lines), lines
    assert "ok    model: offline (from the default); mode: ask" in lines
    assert "ok    OpenAI key: OPENAI_API_KEY" in lines
    assert ("note  Anthropic key: none (acp-agent login --provider anthropic, or set"
            " ANTHROPIC_API_KEY)") in lines
    assert "ok    sessions: 0 saved, index readable" in lines
    os.chmod(state_dir, 0o700)
    lines = acp("doctor", "--state-dir", state_dir, env=env).stdout.splitlines()
    assert any(line.startswith(f"ok    state directory: {state_dir} (writable, private, ")
               for line in lines)
    assert "sk-never-shown" not in result.stdout + result.stderr


async def test_doctor_fails_on_a_server_that_is_not_there_and_a_missing_key(
    state_dir: str, tmp_path: Path,
) -> None:
    env = agent_env({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    env.pop("OPENAI_API_KEY", None)
    async with FakeLLMServer() as server:
        up = await run_async("doctor", "--model", "openai:gpt-4.1", "--base-url",
                             server.openai_url, "--state-dir", state_dir, env=env)
    assert f"ok    OpenAI at {server.openai_url}: reachable" in up.stdout
    assert "ok    OpenAI key: none needed (a base URL is set)" in up.stdout
    down = await run_async("doctor", "--model", "ollama:qwen", "--base-url",
                           "http://127.0.0.1:9/v1", "--state-dir", state_dir, env=env)
    assert down.returncode == 1
    assert ("FAIL  Ollama at http://127.0.0.1:9/v1: connection refused (is Ollama running?"
            " Start it with `ollama serve`)") in down.stdout
    keyless = await run_async("doctor", "--model", "anthropic:claude-sonnet-4-5",
                              "--state-dir", state_dir, env=env)
    assert keyless.returncode == 1
    assert ("FAIL  Anthropic key: none (acp-agent login --provider anthropic, or set"
            " ANTHROPIC_API_KEY)") in keyless.stdout


@pytest.mark.parametrize(("script_text", "status", "says"), [
    (None, "NOTE", "sandbox: none (bubblewrap is not installed"),
    ("#!/bin/sh\nexit 0\n", "OK", "sandbox: bubblewrap ({path})"),
    ("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n", "NOTE",
     "sandbox: none (bubblewrap does not work here (bwrap: No permissions to create new"),
])
def test_the_sandbox_line_says_whether_bubblewrap_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script_text: str | None, status: str,
    says: str,
) -> None:
    """The doctor runs the probe the agent runs (bubblewrap making its namespaces)."""
    from acp_agent.cli import doctor

    path = tmp_path / "bwrap"
    if script_text is not None:
        path.write_text(script_text)
        path.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    got, line = doctor.sandbox()
    assert got == getattr(doctor, status) and line.startswith(says.format(path=path)), line


# ------------------------------------------------------------------ --debug


async def test_debug_logs_every_model_request(state_dir: str, workspace: str) -> None:
    async with FakeLLMServer() as server:
        server.enqueue(Reply([Text("hi"), Usage(10, 2), Finish("stop")]))
        result = await run_async(
            "run", "hello", "--debug", "--model", "openai:gpt-4.1", "--state-dir", state_dir,
            "--cwd", workspace,
            env=agent_env({"OPENAI_API_KEY": "sk-secret-key", "OPENAI_BASE_URL":
                           server.openai_url.replace("http://", "http://user:pw@")}),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hi\n"
    logged = [json.loads(line) for line in result.stderr.splitlines()
              if line.startswith("{") and '"model request"' in line]
    seen = [(e["method"], e["url"], e["status"]) for e in logged]
    assert ("POST", server.openai_url + "/chat/completions", 200) in seen
    assert len(logged) == len(server.requests) + len(server.model_requests)  # every one
    assert all(isinstance(e["ms"], float) for e in logged)
    assert "sk-secret-key" not in result.stderr and "user:pw" not in result.stderr


class Done:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


async def run_async(*args: str, env: dict[str, str]) -> Done:
    """The command, run while this loop serves a fake model server."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_agent", *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def test_the_history_file_is_private(tmp_path: Path) -> None:
    from acp_agent.human.lineeditor import history_path

    loose = tmp_path / "state"
    loose.mkdir()
    (loose / "chat-history").write_text("")
    (loose / "chat-history").chmod(0o644)
    path = history_path(str(loose))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
