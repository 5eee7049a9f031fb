"""``acp-agent login`` / ``logout``: the terminal sign-in an editor runs (driven here
through a pseudo-terminal, as the editor's terminal would) and its scripted form."""

from __future__ import annotations

import json
import os
import re
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import agent_env
from .limits import WAIT


def keys_file(cfg: Path) -> Path:
    return cfg / "acp-agent" / "credentials" / "keys.json"


def stored(cfg: Path) -> dict[str, dict[str, str]]:
    providers: dict[str, dict[str, str]] = json.loads(keys_file(cfg).read_text())["providers"]
    return providers


def acp(cfg: Path, *args: str, stdin: str = "", extra: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = agent_env({"XDG_CONFIG_HOME": str(cfg), **(extra or {})})
    return subprocess.run([sys.executable, "-m", "acp_agent", *args], input=stdin, text=True,
                          capture_output=True, env=env, timeout=WAIT)


class Terminal:
    """``acp-agent ...`` on a pseudo-terminal: what it shows, and typing into it."""

    def __init__(self, cfg: Path, *args: str) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_agent", *args], stdin=slave, stdout=slave, stderr=slave,
            env=agent_env({"XDG_CONFIG_HOME": str(cfg), "TERM": "dumb"}), close_fds=True)
        os.close(slave)
        self.screen = ""

    def expect(self, text: str) -> None:
        """Read until ``text`` is on the screen (a bounded wait, never a sleep)."""
        while text not in self.screen:
            ready, _, _ = select.select([self.master], [], [], WAIT)
            assert ready, f"{text!r} never appeared; the screen shows {self.screen!r}"
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the process is gone and its side of the terminal closed
                chunk = b""
            assert chunk, f"{text!r} never appeared; the screen shows {self.screen!r}"
            self.screen += chunk.decode(errors="replace")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> int:
        code = self.proc.wait(WAIT)
        while True:  # the rest of the screen, to the end (EIO once every slave side closed:
            # what the process wrote just before it ended may still be on its way)
            ready, _, _ = select.select([self.master], [], [], WAIT)
            try:
                chunk = os.read(self.master, 4096) if ready else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            self.screen += chunk.decode(errors="replace")
        os.close(self.master)
        return code


def test_login_in_a_terminal_asks_without_echo_and_stores_privately(tmp_path: Path) -> None:
    """What the editor's terminal authentication runs: the configured command + ``login``."""
    cfg = tmp_path / "cfg"
    term = Terminal(cfg, "--model", "anthropic:claude-sonnet-4-5", "--state-dir",
                    str(tmp_path / "s"), "login", "--store", "file")
    term.expect("Anthropic API key (not shown): ")
    term.type("sk-ant-typed-secret\r")
    assert term.finish() == 0, term.screen
    assert "Sign in to Anthropic for anthropic:claude-sonnet-4-5" in term.screen
    assert "sk-ant-typed-secret" not in term.screen  # never echoed, never repeated
    assert "Stored the Anthropic API key in" in term.screen
    assert stored(cfg) == {"anthropic": {"key": "sk-ant-typed-secret"}}
    assert stat.S_IMODE(keys_file(cfg).stat().st_mode) == 0o600


def test_login_without_a_keyed_model_asks_which_provider(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    term = Terminal(cfg, "login", "--store", "file")  # the offline model takes no key
    term.expect("Choice [1]: ")
    assert "1) OpenAI (OPENAI_API_KEY)" in term.screen and "3) OpenRouter" in term.screen
    term.type("7\r")
    term.expect("Type a number from 1 to 3.")
    term.type("3\r")
    term.expect("OpenRouter API key (not shown): ")
    term.type("sk-or-1\r")
    assert term.finish() == 0, term.screen
    assert stored(cfg) == {"openrouter": {"key": "sk-or-1"}}


def test_an_empty_answer_stores_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    term = Terminal(cfg, "--model", "openai:gpt-4.1", "login")
    term.expect("OpenAI API key (not shown): ")
    term.type("\r")
    assert term.finish() == 1
    assert "no key given: nothing stored." in term.screen
    assert not keys_file(cfg).exists()


def test_key_from_stdin_and_logout(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    done = acp(cfg, "login", "--provider", "openai", "--key-from-stdin", "--store", "file",
               stdin="sk-piped\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "sk-piped" not in done.stderr
    assert stored(cfg) == {"openai": {"key": "sk-piped"}}
    shadowed = acp(cfg, "login", "--provider", "openai", "--key-from-stdin", "--store", "file",
                   stdin="sk-again\n", extra={"OPENAI_API_KEY": "sk-env"})
    assert "OPENAI_API_KEY is set in this environment; the agent uses it instead" in shadowed.stderr
    out = acp(cfg, "--model", "openai:gpt-4.1", "logout")
    assert out.returncode == 0 and "Forgot the stored API key of OpenAI." in out.stderr
    assert stored(cfg) == {}
    again = acp(cfg, "logout", "--provider", "anthropic")
    assert again.returncode == 0 and "No API key was stored for Anthropic." in again.stderr


@pytest.mark.parametrize(("args", "stdin", "code", "message"), [
    (("login",), "sk\n", 2, "standard input is not a terminal"),
    (("login", "--key-from-stdin"), "sk\n", 2, "offline takes no key: name the provider"),
    (("login", "--provider", "openai", "--key-from-stdin"), "\n", 1, "no key given"),
    (("login", "--provider", "openai", "--key-from-stdin"), "sk one\n", 1, "one word"),
    (("login", "--provider", "ollama"), "", 2, "invalid choice: 'ollama'"),
    (("--model", "nope:x", "login", "--key-from-stdin"), "sk\n", 2, "`model` must be"),
])
def test_bad_use_is_refused_clearly(
    tmp_path: Path, args: tuple[str, ...], stdin: str, code: int, message: str
) -> None:
    done = acp(tmp_path / "cfg", *args, stdin=stdin)
    assert done.returncode == code and message in done.stderr, done.stderr
    assert not keys_file(tmp_path / "cfg").exists()


def test_the_subcommand_stands_first_or_after_the_agent_flags() -> None:
    from acp_agent.cli import subcommand

    assert subcommand(["login"]) == 0
    assert subcommand(["--model", "openai:gpt-4.1", "--mode=plan", "login"]) == 3
    assert subcommand(["--model", "login"]) is None  # a flag's value
    assert subcommand(["--model", "openai:x", "run", "login"]) == 2  # run's prompt
    assert subcommand(["--version", "logout", "--provider", "openai"]) == 1
    assert subcommand([]) is None


def test_help_names_login_and_logout(tmp_path: Path) -> None:
    lines = acp(tmp_path, "--help").stdout.splitlines()
    assert any(line.startswith("  login ") for line in lines)
    assert any(line.startswith("  logout ") for line in lines)
    text = acp(tmp_path, "login", "--help").stdout
    for flag in ("--provider", "--key-from-stdin", "--store", "--model", "--config"):
        assert flag in text
    for flag in ("--base-url", "--state-dir", "--mode", "--log-level", "--log-file"):
        # accepted (an editor's command line has them), not shown
        assert not re.search(rf"{flag}(?![\w-])", text)
