"""`acp-agent run` and `chat` as a person uses them: in a real pseudo-terminal, read as a
screen (pyte plays the terminal), keys sent as a terminal sends them (Ctrl-C is the
terminal's interrupt character, so the kernel signals the whole foreground process group,
as it would in a shell). Every wait is for something to appear on the screen.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pyte
import pytest

from .harness import agent_env
from .limits import WAIT

ROWS, COLS = 60, 110
PROMPT = re.compile(r"^> ?$", re.M)  # the chat's prompt, alone at the start of a line


class Term:
    """A command in a pseudo-terminal and the screen it draws."""

    def __init__(self, *args: str, env: dict[str, str] | None = None,
                 cwd: str | None = None, cols: int = COLS) -> None:
        self.screen = pyte.Screen(cols, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""
        environ = agent_env({"TERM": "xterm-256color", **(env or {})})
        for sized in ("COLUMNS", "LINES"):  # pytest-xdist workers set 80x24: the pty's own
            environ.pop(sized, None)  # size is what a terminal program must read
        self.child: pexpect.spawn[bytes] = pexpect.spawn(
            sys.executable, ["-m", "acp_agent", *args], cwd=cwd, dimensions=(ROWS, cols),
            env=environ)
        self.status: int | None = None

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip("\n")

    def _pump(self, timeout: float) -> bool:
        """Read what the command wrote (up to ``timeout`` s for the first byte); ``False``
        at its end."""
        try:
            data = self.child.read_nonblocking(65536, timeout=timeout)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self.raw += data
        self.stream.feed(data)
        return True

    def wait_for(self, what: str | re.Pattern[str] | Callable[[str], bool],
                 timeout: float = WAIT) -> str:
        """Read until ``what`` is on the screen; the screen's text."""
        def found(text: str) -> bool:
            if isinstance(what, str):
                return what in text
            if isinstance(what, re.Pattern):
                return what.search(text) is not None
            return what(text)

        import time

        deadline = time.monotonic() + timeout
        while not found(self.text()):
            if time.monotonic() > deadline or not self._pump(0.5):
                if found(self.text()):
                    break
                pytest.fail(f"{what!r} never appeared; the screen:\n{self.text()}")
        return self.text()

    def type(self, line: str) -> None:
        self.child.send(line + "\r")

    def ctrl_c(self) -> None:
        self.child.sendintr()

    def ctrl_d(self) -> None:
        self.child.sendeof()

    def finish(self, timeout: float = WAIT) -> int:
        """Wait for the command to end; its exit status (128 + N when killed by signal N)."""
        import time

        deadline = time.monotonic() + timeout
        while self._pump(1):
            if time.monotonic() > deadline:
                self.child.terminate(force=True)
                pytest.fail(f"the command did not end; the screen:\n{self.text()}")
        self.child.wait()
        self.status = (self.child.exitstatus if self.child.exitstatus is not None
                       else 128 + (self.child.signalstatus or 0))
        return self.status

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


Start = Callable[..., Term]


@pytest.fixture
def term(state_dir: str, workspace: str) -> Iterator[Start]:
    started: list[Term] = []

    def start(*args: str, env: dict[str, str] | None = None, where: bool = True) -> Term:
        flags = ("--state-dir", state_dir, "--cwd", workspace) if where else ()
        t = Term(*args, *flags, env=env, cwd=workspace)
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()


def script(tmp_path: Path, *responses: list[dict[str, object]]) -> dict[str, str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(list(responses)))
    return {"ACP_AGENT_OFFLINE_SCRIPT": str(path)}


def at_prompt(text: str) -> bool:
    """The chat waits for a line: its prompt is the screen's last line."""
    return text.splitlines()[-1:] == [">"]


QUESTION = "? Allow Run `ls`?"
CHOICES = "  [a]llow once, [A]lways, [r]eject, [R]eject always (Ctrl-C: reject and cancel):"


# ------------------------------------------------------------------ the quick start's demo


@pytest.mark.parametrize("attempt", [1, 2])
def test_the_demo_turn_asks_with_its_question_whole_on_screen(
    term: Start, workspace: str, attempt: int,
) -> None:
    t = term("run", "show me what you can do")
    screen = t.wait_for(CHOICES)
    lines = screen.splitlines()
    assert lines[-2:] == [QUESTION, CHOICES.rstrip()]  # nothing drawn over it, nothing below
    t.type("a")
    screen = t.wait_for("— stop: end_turn")
    assert t.finish() == 0
    screen = t.text()
    lines = screen.splitlines()
    assert QUESTION in lines and CHOICES + " a" in lines  # still whole, the answer after it
    assert "✓ Run `ls`" in lines and "  hello.txt" in lines
    assert "I'm running on the offline built-in model (no key, no network)." in screen
    assert "**" not in screen and "```" not in screen  # Markdown, rendered
    assert "Traceback" not in screen and "⠋" not in screen  # the progress line is gone
    assert re.search(r"^— stop: end_turn · tokens: [\d,]+ in / [\d,]+ out · context: ", screen,
                     re.M)


def test_the_readme_shows_the_demo_as_the_screen_does(tmp_path: Path, state_dir: str) -> None:
    """The capture in README.md is what the quick start's command draws, in a project of
    two files on a terminal 92 columns wide (the numbers of the footer aside)."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    captured = readme.split("two files the screen reads:\n\n```text\n", 1)[1].split("```")[0]
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# demo\n")
    (project / "app.py").write_text("print('hello')\n")
    t = Term("run", "show me what you can do", "--state-dir", state_dir, cwd=str(project),
             cols=92)
    try:
        t.wait_for(CHOICES)
        t.type("a")
        assert t.finish() == 0
    finally:
        t.close()

    def numbers(text: str) -> str:
        return re.sub(r"[\d,]+", "N", text)

    assert numbers(t.text()) == numbers(captured.rstrip("\n"))


def test_markdown_and_a_command_that_fails(term: Start, tmp_path: Path) -> None:
    env = script(tmp_path, [
        {"text": "Some **bold** words.\n\n```python\nprint('hi')\n```\n"},
        {"tool_call": {"name": "run_command", "arguments": {"command": "echo out; exit 2"}}},
    ], [{"text": "It failed."}])
    t = term("run", "go", "--yes", env=env)
    t.wait_for("— stop: end_turn")
    assert t.finish() == 0
    lines = t.text().splitlines()
    assert "Some bold words." in lines and "print('hi')" in t.text()
    assert "✗ Run `echo out; exit 2`  exit 2" in lines and "  out" in lines
    assert "**" not in t.text()


# ------------------------------------------------------------------ Ctrl-C and Ctrl-D


def test_ctrl_c_mid_turn_cancels_and_the_chat_goes_on(term: Start, tmp_path: Path) -> None:
    env = script(tmp_path, [{"text": "working on it"}, {"hang": True}],
                 [{"text": "still here"}])
    t = term("chat", env=env)
    t.wait_for(at_prompt)
    t.type("go")
    t.wait_for("working on it")
    t.ctrl_c()
    screen = t.wait_for("— stop: cancelled")
    assert "context: 0" not in screen  # nothing was measured this turn: no stale figure
    t.wait_for(at_prompt)
    t.type("again")  # the same agent: Ctrl-C never reached it
    t.wait_for("— stop: end_turn")
    t.wait_for(at_prompt)
    t.ctrl_d()
    assert t.finish() == 0
    assert "still here" in t.text() and "Traceback" not in t.text()
    assert t.screen.cursor.x == 0  # the shell's prompt starts on a line of its own


def test_ctrl_c_at_a_question_rejects_and_cancels(
    term: Start, tmp_path: Path, workspace: str,
) -> None:
    env = script(tmp_path, [{"tool_call": {"name": "write_file",
                                           "arguments": {"path": "x.txt", "content": "hi"}}}])
    t = term("run", "go", env=env)
    t.wait_for("? Allow Write x.txt?")
    t.wait_for("(Ctrl-C: reject and cancel):")
    t.ctrl_c()
    t.wait_for("— stop: cancelled")
    assert t.finish() == 130
    assert "rejected; cancelling the turn" in t.text().splitlines()
    assert not os.path.exists(os.path.join(workspace, "x.txt"))
    assert "Traceback" not in t.text()


def test_ctrl_c_at_the_prompt_quits(term: Start) -> None:
    t = term("chat")
    t.wait_for(at_prompt)
    t.ctrl_c()
    assert t.finish() == 130
    assert "Traceback" not in t.text() and "KeyboardInterrupt" not in t.text()
    assert t.screen.cursor.x == 0


def test_ctrl_d_at_the_prompt_quits_on_a_new_line(term: Start) -> None:
    t = term("chat")
    t.wait_for(at_prompt)
    t.ctrl_d()
    assert t.finish() == 0
    assert t.text().splitlines()[-1] == ">" and t.screen.cursor.x == 0


def test_mode_lists_the_modes(term: Start) -> None:
    t = term("chat")
    t.wait_for(at_prompt)
    t.type("/mode")
    screen = t.wait_for("bypass")
    lines = screen.splitlines()
    assert "modes (/mode <id> switches):" in lines
    assert any(line.startswith(" ● ask") for line in lines)
    assert all(any(line.startswith(f"   {m}") for line in lines)
               for m in ("accept-edits", "plan", "bypass"))
    t.wait_for(at_prompt)
    t.ctrl_d()
    assert t.finish() == 0


# ------------------------------------------------------------------ mistakes: one line each


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "bad.toml").write_text('[limits]\nmax-turn-requests = "many"\n')
    (tmp_path / "bad.json").write_text('[[{"text": "x"}')
    (tmp_path / "odd.json").write_text('[[{"txt": "x"}]]')
    (tmp_path / "noretry.toml").write_text("[limits]\nmax-retries = 0\n")
    return {"dir": str(tmp_path)}


MISTAKES = {
    "missing key": (["--model", "openai:gpt-4.1"], {},
                    "openai:gpt-4.1 needs an API key: set OPENAI_API_KEY"),
    "unknown provider": (["--model", "gpt-4"], {}, "--model 'gpt-4': unknown provider"),
    "no model": (["--model", "anthropic"], {},
                 "--model 'anthropic' names a provider but no model: write anthropic:<model>, "
                 "e.g. anthropic:claude-sonnet-4-5"),
    "bad config": (["--config", "{dir}/bad.toml"], {}, "`limits.max-turn-requests`"),
    "bad ACP_AGENT_MODEL": ([], {"ACP_AGENT_MODEL": "nope"}, "got 'nope'"),
    "missing script": ([], {"ACP_AGENT_OFFLINE_SCRIPT": "{dir}/none.json"},
                       "ACP_AGENT_OFFLINE_SCRIPT: cannot read {dir}/none.json"),
    "malformed script": ([], {"ACP_AGENT_OFFLINE_SCRIPT": "{dir}/bad.json"}, "not valid JSON"),
    "odd script": ([], {"ACP_AGENT_OFFLINE_SCRIPT": "{dir}/odd.json"}, "unknown key 'txt'"),
    "no such cwd": (["--cwd", "/nonexistent"], {}, "--cwd /nonexistent: /nonexistent does not"),
    "log file": (["--log-file", "{dir}/no/such/dir/log"], {},
                 "log file {dir}/no/such/dir/log: No such file or directory"),
    "base URL form": (["--model", "ollama:qwen", "--base-url", "localhost:11434"], {},
                      "write it with its scheme, e.g. 'http://localhost:11434'"),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_each_mistake_is_one_line_and_a_failure(
    term: Start, bad_files: dict[str, str], state_dir: str, mistake: str,
) -> None:
    args, env, says = MISTAKES[mistake]

    def fill(s: str) -> str:
        return s.format(**bad_files)

    t = term("run", "hi", *map(fill, args), "--state-dir", state_dir,
             env={k: fill(v) for k, v in env.items()}, where=False)
    assert t.finish() == 2
    written = t.raw.decode()  # what was written: the screen wraps long lines
    lines = [line for line in written.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("acp-agent: "), written
    assert fill(says) in lines[0]


def test_a_server_that_is_not_there_is_named(term: Start, bad_files: dict[str, str]) -> None:
    t = term("run", "hi", "--model", "ollama:qwen", "--base-url", "http://127.0.0.1:9/v1",
             "--config", f"{bad_files['dir']}/noretry.toml")
    assert t.finish() == 1
    written = t.raw.decode()
    assert "Cannot connect to http://127.0.0.1:9/v1: connection refused" in written
    assert "is the server running, and is --base-url right?" in written
    assert "Traceback" not in written and '"level"' not in written  # no log lines either


def test_an_agent_that_dies_is_one_line(term: Start, tmp_path: Path) -> None:
    t = term("run", "go", env=script(tmp_path, [{"text": "working"}, {"hang": True}]))
    t.wait_for("working")
    (agent,) = Path(f"/proc/{t.child.pid}/task/{t.child.pid}/children").read_text().split()
    os.kill(int(agent), signal.SIGKILL)
    assert t.finish() == 1
    lines = [line for line in t.text().splitlines() if line.startswith("acp-agent:")]
    assert lines == ["acp-agent: the agent exited unexpectedly (killed by signal 9); "
                     "--debug shows its log"]
    assert "Traceback" not in t.text()


def test_plain_acp_agent_on_a_terminal_says_what_it_is(term: Start) -> None:
    t = term(where=False)
    t.wait_for("(Ctrl-D ends this).")
    t.ctrl_d()
    assert t.finish() == 0
    assert "speaks the Agent Client Protocol (JSON-RPC) on stdin/stdout" in t.text()
