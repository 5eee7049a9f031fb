"""The command line: flags, configuration errors, and the human mode (run/chat)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .harness import ROOT, agent_env
from .limits import WAIT


def acp(*args: str, stdin: str = "", cwd: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acp_agent", *args], input=stdin, text=True,
                          capture_output=True, env=agent_env({"NO_COLOR": "1", **(env or {})}),
                          cwd=cwd, timeout=WAIT)


def test_help_explains_every_flag() -> None:
    out = acp("--help").stdout
    for flag in ("--model", "--base-url", "--config", "--state-dir", "--mode", "--log-level",
                 "--log-file", "--version", "run PROMPT", "chat"):
        assert flag in out


def test_version() -> None:
    from acp_agent import __version__

    assert acp("--version").stdout.strip() == f"acp-agent {__version__}"


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text('[limits]\nmax-turn-requests = "many"\n')
    result = acp("--config", str(bad))
    assert result.returncode == 2 and "limits.max-turn-requests" in result.stderr
    bad.write_text("modle = 'offline'\n")
    result = acp("--config", str(bad))
    assert result.returncode == 2 and "modle" in result.stderr
    result = acp("--model", "gpt-4")
    assert result.returncode == 2 and "model" in result.stderr


def test_run_prints_the_answer(state_dir: str, workspace: str) -> None:
    result = acp("run", "hello", "--state-dir", state_dir, "--cwd", workspace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Hello! I'm acp-agent on its offline built-in model.")
    assert result.stdout.count("\n") == 1  # the answer, alone
    assert result.stderr.startswith("— stop: end_turn · tokens: ")  # the rest on stderr
    assert "\x1b" not in result.stderr + result.stdout  # not a terminal: no colours


def test_run_with_yes_runs_the_tool(state_dir: str, workspace: str) -> None:
    result = acp("run", "run echo from-the-tool", "--yes", "--state-dir", state_dir,
                 "--cwd", workspace)
    assert result.returncode == 0, result.stderr
    assert "✓ Run `echo from-the-tool`" in result.stderr
    assert result.stderr.count("from-the-tool") >= 2  # the title and the command's output
    assert result.stdout == "`run_command` worked; its output is shown above.\n"


def test_plain_acp_agent_keeps_quiet_when_stdin_is_not_a_terminal() -> None:
    result = acp(stdin="")  # an editor's pipe: stderr stays clean
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_run_without_a_terminal_does_not_run_tools_and_says_why(
    state_dir: str, workspace: str,
) -> None:
    """Not "the user rejected": nobody could be asked, and the model and the person are
    told so."""
    result = acp("run", "write notes.txt hi", "--state-dir", state_dir, "--cwd", workspace)
    assert result.returncode == 0, result.stderr
    why = ("✗ Write notes.txt\n  Not run: permission could not be asked (acp-agent run has no "
           "terminal to ask on (stdin is not one), so tool calls that need permission are not "
           "run; --yes allows them, --deny rejects them).\n")
    assert result.stderr.count(why) == 1  # said once: the call shows why it did not run
    assert "acp-agent:" not in result.stderr
    assert result.stdout == "`write_file` did not run (the call above says why), so I'll " \
        "leave it there.\n"
    assert not os.path.exists(os.path.join(workspace, "notes.txt"))


def test_run_with_deny_rejects(state_dir: str, workspace: str) -> None:
    result = acp("run", "write notes.txt hi", "--deny", "--state-dir", state_dir,
                 "--cwd", workspace)
    assert result.returncode == 0
    assert "✗ Write notes.txt\n  The user rejected this tool call." in result.stderr
    assert not os.path.exists(os.path.join(workspace, "notes.txt"))


def test_run_with_json_prints_the_updates_and_the_result(state_dir: str, workspace: str) -> None:
    result = acp("run", "run echo hi", "--yes", "--json", "--state-dir", state_dir,
                 "--cwd", workspace)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [line["update"]["sessionUpdate"] for line in lines[:-1]]
    assert {"agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk",
            "usage_update"} <= set(kinds)
    assert len({line["sessionId"] for line in lines[:-1]}) == 1
    assert lines[-1]["result"]["stopReason"] == "end_turn"


def sessions(state_dir: str) -> list[str]:
    where = os.path.join(state_dir, "sessions")
    return sorted(os.listdir(where)) if os.path.isdir(where) else []


def test_run_keeps_no_session_unless_saved_and_chat_keeps_its_own(
    state_dir: str, workspace: str,
) -> None:
    where = ("--state-dir", state_dir, "--cwd", workspace)
    assert acp("run", "hello", *where).returncode == 0
    assert sessions(state_dir) == []
    assert acp("run", "hello", "--save", *where).returncode == 0
    assert len([s for s in sessions(state_dir) if s.endswith(".jsonl")]) == 1
    assert acp("chat", *where, stdin="hello\n").returncode == 0
    assert len([s for s in sessions(state_dir) if s.endswith(".jsonl")]) == 2
    assert acp("chat", "--no-save", *where, stdin="hello\n").returncode == 0
    assert len([s for s in sessions(state_dir) if s.endswith(".jsonl")]) == 2


def test_run_and_chat_flags_are_checked(state_dir: str) -> None:
    result = acp("run", "hi", "--yes", "--deny")
    assert result.returncode == 2 and "not allowed with argument" in result.stderr
    result = acp("chat", "--json")
    assert result.returncode == 2 and "--json" in result.stderr
    result = acp("run", "  ", "--state-dir", state_dir)
    assert (result.returncode, result.stderr) == (2, "acp-agent: run: the prompt is empty\n")


def test_chat_reads_prompts_until_eof(state_dir: str, workspace: str) -> None:
    result = acp("chat", "--state-dir", state_dir, "--cwd", workspace, stdin="hello\nlist\n")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("stop: end_turn") == 2
    assert "hello.txt" in result.stderr  # the listing, shown with its tool call


def test_plain_flags_are_read_without_argparse() -> None:
    """The forms editors pass are read directly; anything else falls back to argparse."""
    from acp_agent.cli import _plain_flags

    args = _plain_flags(["--model", "openai:gpt-4.1", "--state-dir=/tmp/s", "--log-level", "debug"])
    assert args is not None
    assert (args.model, args.state_dir, args.log_level, args.base_url) == (
        "openai:gpt-4.1", "/tmp/s", "debug", None)
    for argv in (["--help"], ["--version"], ["--model"], ["--model", "--mode"], ["--mode="],
                 ["--model", "a", "--model", "b"], ["-h"], ["stray"]):
        assert _plain_flags(argv) is None, argv


def test_a_log_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    result = acp("--log-file", str(tmp_path / "no" / "log"))
    assert result.returncode == 2
    assert result.stderr == f"acp-agent: log file {tmp_path}/no/log: No such file or directory\n"


def test_plain_flag_values_are_still_validated(state_dir: str) -> None:
    result = acp("--mode", "reckless", "--state-dir", state_dir)
    assert result.returncode == 2 and "default-mode" in result.stderr
    result = acp("--bogus", "x")
    assert result.returncode == 2 and "--bogus" in result.stderr


def test_the_example_configuration_is_valid() -> None:
    """config.example.toml documents every setting with its default: it must load as is."""
    import tomllib

    from acp_agent.config import Config, from_mapping

    with open(ROOT / "config.example.toml", "rb") as fh:
        config = from_mapping(tomllib.load(fh), "config.example.toml")
    assert config.limits == Config().limits and config.model == "offline"
    assert config.sandbox == Config().sandbox


def test_plain_acp_agent_imports_neither_rich_nor_the_human_mode() -> None:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "acp_agent"], input="",
                            capture_output=True, text=True, env=agent_env(), timeout=WAIT)
    names = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
             if line.startswith("import time:")}
    assert "acp_agent.cli" in names and "acp_agent.server" in names
    assert sorted(n for n in names
                  if n.split(".")[0] in ("rich", "pygments", "markdown_it")
                  or n.startswith("acp_agent.human")) == []
