"""The command line: flags, configuration errors, and the human mode (run/chat)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .harness import ROOT, agent_env
from .limits import WAIT


def acp(*args: str, stdin: str = "", cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acp_agent", *args], input=stdin, text=True,
                          capture_output=True, env=agent_env({"NO_COLOR": "1"}), cwd=cwd,
                          timeout=WAIT)


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
    assert "offline built-in model" in result.stdout
    assert "stop: end_turn" in result.stdout


def test_run_with_yes_runs_the_tool(state_dir: str, workspace: str) -> None:
    result = acp(
        "run", "run echo from-the-tool", "--yes", "--state-dir", state_dir, "--cwd", workspace
    )
    assert result.returncode == 0, result.stderr
    assert "✓ Run `echo from-the-tool`" in result.stdout
    assert result.stdout.count("from-the-tool") >= 2  # the title and the command's output


def test_run_without_a_terminal_rejects_tools(state_dir: str, workspace: str) -> None:
    result = acp("run", "write notes.txt hi", "--state-dir", state_dir, "--cwd", workspace)
    assert result.returncode == 0, result.stderr
    assert "✗" in result.stdout and "rejected" in result.stdout
    import os

    assert not os.path.exists(os.path.join(workspace, "notes.txt"))


def test_chat_reads_prompts_until_eof(state_dir: str, workspace: str) -> None:
    result = acp("chat", "--state-dir", state_dir, "--cwd", workspace, stdin="hello\nlist\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("stop: end_turn") == 2
    assert "hello.txt" in result.stdout


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
