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
        # a terminal answers what is asked of it (the line editor asks where the cursor is)
        def answer(data: str) -> None:
            self.child.send(data)

        self.screen.write_process_input = answer  # type: ignore[method-assign]
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

    def key(self, keys: str) -> None:
        """Keys as the terminal sends them, no Enter after (``\x1b[A`` is the up arrow)."""
        self.child.send(keys)

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
OPTIONS = ["  [a] Allow once", "  [A] Always allow `ls`", "  [r] Reject",
           "  [R] Always reject `ls`"]
CHOICES = "  Press a key (Ctrl-C: reject and cancel):"


# ------------------------------------------------------------------ the quick start's demo


@pytest.mark.parametrize("attempt", [1, 2])
def test_the_demo_turn_asks_with_its_question_whole_on_screen(
    term: Start, workspace: str, attempt: int,
) -> None:
    t = term("run", "show me what you can do")
    screen = t.wait_for(CHOICES)
    lines = screen.splitlines()
    # each option by its own name; nothing drawn over the question, nothing below it
    assert lines[-6:] == [QUESTION, *OPTIONS, CHOICES.rstrip()]
    t.key("a")  # one key, no Enter
    screen = t.wait_for("— stop: end_turn")
    assert t.finish() == 0
    screen = t.text()
    lines = screen.splitlines()
    assert QUESTION in lines and CHOICES + " Allow once" in lines  # whole, the answer after it
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
        t.key("a")
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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_mid_turn_ends_the_chat_with_128_plus_its_number(
    term: Start, tmp_path: Path, sig: signal.Signals
) -> None:
    """The status table: 143 for SIGTERM, 129 for SIGHUP; the agent goes too."""
    from .procs import all_gone, children

    env = script(tmp_path, [{"text": "working on it"}, {"hang": True}])
    t = term("chat", env=env)
    t.wait_for(at_prompt)
    t.type("go")
    t.wait_for("working on it")
    assert t.child.pid is not None
    agents = children(t.child.pid)
    assert agents, "the chat's agent process"
    t.child.kill(sig)
    assert t.finish() == 128 + sig
    assert all_gone(agents), "the agent outlived the chat"


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


def test_ctrl_c_clears_the_line_and_twice_at_an_empty_one_quits(
    term: Start, state_dir: str,
) -> None:
    t = term("chat")
    t.wait_for(at_prompt)
    t.key("half a thought")
    t.wait_for("> half a thought")
    t.ctrl_c()  # clears the line: nothing is sent
    t.wait_for(lambda text: text.splitlines()[-1] == ">")
    t.ctrl_c()  # on an empty line: says how to quit
    t.wait_for("(Ctrl-C again quits; Ctrl-D or `exit` too)")
    t.wait_for(at_prompt)
    t.ctrl_c()
    assert t.finish() == 130
    assert "— stop" not in t.text() and prompts(state_dir) == []
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
    t.type("/mode plan")
    t.wait_for("Mode: plan.")
    t.wait_for(at_prompt)
    assert t.text().count("plan.") == 1 and "mode: plan" not in t.text()  # said once
    assert "— stop" not in t.text()  # the agent answered by itself: no footer
    t.ctrl_d()
    assert t.finish() == 0


# ------------------------------------------------------------------ mistakes: one line each


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "bad.toml").write_text('[limits]\nmax-turn-requests = "many"\n')
    (tmp_path / "bad.json").write_text('[[{"text": "x"}')
    (tmp_path / "odd.json").write_text('[[{"txt": "x"}]]')
    (tmp_path / "object.json").write_text('{"text": "x"}')
    (tmp_path / "noretry.toml").write_text("[limits]\nmax-retries = 0\n")
    (tmp_path / "underscore.toml").write_text('model = "offline"\ndefault_mode = "plan"\n')
    (tmp_path / "section.toml").write_text('[openai]\ntimeout = 30\nbase_url = "http://x"\n')
    return {"dir": str(tmp_path)}


MISTAKES = {
    "missing key": (["--model", "openai:gpt-4.1"], {},
                    "openai:gpt-4.1 needs an API key: run `acp-agent login --provider openai` to"
                    " store one, or set OPENAI_API_KEY in the environment"),
    "unknown variable": ([], {"ACP_AGENT_MODE": "plan"},
                         "ACP_AGENT_MODE is not a setting of acp-agent; did you mean"
                         " `ACP_AGENT_DEFAULT_MODE`?"),
    "bad mode variable": ([], {"ACP_AGENT_DEFAULT_MODE": "planning"},
                          "ACP_AGENT_DEFAULT_MODE: `default-mode` must be one of ask,"
                          " accept-edits, auto, plan, bypass, got \"planning\""),
    "underscore key": (["--config", "{dir}/underscore.toml"], {},
                       "{dir}/underscore.toml:2: `default_mode` is not a setting; did you mean"
                       " `default-mode`?"),
    "section key": (["--config", "{dir}/section.toml"], {},
                    "{dir}/section.toml:3: [openai] `base_url` is not a setting; did you mean"
                    " `base-url`?"),
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
    "object script": ([], {"ACP_AGENT_OFFLINE_SCRIPT": "{dir}/object.json"},
                      "{dir}/object.json: the whole script is an object ({{...}}): a script is a"
                      " list of responses, each a list of steps, e.g. [[{{\"text\": \"Hello\"}}]"),
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


@pytest.mark.parametrize(("args", "says"), [
    (["--model", "ollama:qwen", "--base-url", "http://127.0.0.1:9/v1"],
     "cannot connect to http://127.0.0.1:9/v1 (--base-url): connection refused; is Ollama"
     " running? Start it with `ollama serve`"),
    (["--model", "openai:qwen", "--base-url", "http://no-such-host.invalid:9/v1"],
     "cannot connect to http://no-such-host.invalid:9/v1 (--base-url): unknown host"
     " 'no-such-host.invalid'; is the server running, and is the base URL right?"),
])
@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_server_that_is_not_there_is_one_line_at_once(
    term: Start, command: str, args: list[str], says: str,
) -> None:
    """Before any prompt, without retries: a refused connection or an unknown host is a
    mistake to fix (status 2), said with the likely fix."""
    t = term(command, *(["hi"] if command == "run" else []), *args)
    assert t.finish() == 2
    lines = [line for line in t.raw.decode().splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("acp-agent: ")] == [f"acp-agent: {says}"]
    assert "Traceback" not in t.raw.decode() and '"level"' not in t.raw.decode()


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


def prompts(state_dir: str) -> list[str]:
    """The prompts the sessions in ``state_dir`` were sent, in order."""
    found = []
    for log in sorted(Path(state_dir, "sessions").glob("*.jsonl")):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("r") == "prompt":
                found.append("".join(b.get("text", "") for b in record["blocks"]))
    return found


# ------------------------------------------------------------------ the line editor

UP, DOWN, ALT_ENTER, CTRL_R = "\x1b[A", "\x1b[B", "\x1b\r", "\x12"


def chat_answered(t: Term, count: int) -> None:
    """Wait for the chat's ``count``-th footer and the prompt after it."""
    t.wait_for(lambda text: text.count("— stop: end_turn") >= count and at_prompt(text))


def test_history_multi_line_prompts_and_the_quiet_ctrl_d(term: Start, state_dir: str) -> None:
    t = term("chat")
    t.wait_for(at_prompt)
    t.key("hello\\")  # a trailing backslash: the prompt goes on on the next line
    t.key("\r")
    t.key("there")
    t.key(ALT_ENTER)  # so does Alt-Enter
    t.key("friend")
    t.wait_for("  friend")
    t.key("\x04")  # Ctrl-D on a line with text does nothing
    t.key("\r")
    chat_answered(t, 1)
    t.type("list")
    chat_answered(t, 2)
    t.ctrl_d()
    assert t.finish() == 0
    assert prompts(state_dir) == ["hello\nthere\nfriend", "list"]
    history = Path(state_dir, "chat-history")
    assert history.stat().st_mode & 0o777 == 0o600  # the user's alone

    t = term("chat")  # another chat: the history is there
    t.wait_for(at_prompt)
    t.key(UP)
    t.wait_for(lambda text: text.splitlines()[-1] == "> list")
    t.key(UP)
    t.wait_for("> hello")  # the multi-line prompt, whole
    t.key(DOWN)
    t.wait_for(lambda text: text.splitlines()[-1] == "> list")  # and back down
    t.key("\x03")  # cleared, nothing sent
    t.key(CTRL_R + "lis")
    t.wait_for("lis': list")  # reverse search
    t.key("\r")  # accepts the match into the line
    t.key("\r")  # and sends it
    chat_answered(t, 1)
    t.type("exit")  # quits, and is not sent
    assert t.finish() == 0
    assert prompts(state_dir)[2:] == ["list"]
    t = term("chat")
    t.wait_for(at_prompt)
    t.type("quit")  # so does `quit`
    assert t.finish() == 0
    assert prompts(state_dir)[2:] == ["list"]


# ------------------------------------------------------------------ back into a conversation


def test_continue_and_resume_go_back_into_a_conversation(
    term: Start, state_dir: str, workspace: str,
) -> None:
    t = term("chat")
    t.wait_for(at_prompt)
    t.type("read hello.txt")
    chat_answered(t, 1)
    t.ctrl_d()
    assert t.finish() == 0
    (first,) = re.findall(r"saved as (sess_\w+) \(resume: acp-agent chat --resume \1 "
                          rf"--state-dir {re.escape(state_dir)}\)", t.raw.decode())

    t = term("chat", "--continue")  # this directory's latest: the last exchanges shown
    t.wait_for(at_prompt)
    screen = t.text()
    assert f"resumed: read hello.txt ({first})" in screen and "> read hello.txt" in screen
    assert "✓ Read hello.txt" in screen
    t.type("list")
    chat_answered(t, 1)
    t.key("\x03\x03")  # Ctrl-C twice on an empty line quits
    assert t.finish() == 130
    assert f"saved as {first}" in t.text()

    t = term("chat")  # a second conversation, said nothing: leaves nothing behind
    t.wait_for(at_prompt)
    t.ctrl_d()
    assert t.finish() == 0 and "saved as" not in t.text()

    t = term("chat", "--resume")  # a list to pick from
    t.wait_for("resume which? [1-1, Enter: 1]")
    assert re.search(r"^\s+1\s+just now\s+read hello\.txt$", t.text(), re.M)
    t.type("1")
    t.wait_for(at_prompt)
    assert "> list" in t.text() and "> read hello.txt" in t.text()
    t.ctrl_d()
    assert t.finish() == 0
    assert prompts(state_dir) == ["read hello.txt", "list"]


def test_resume_with_an_id_nobody_has_is_one_line(term: Start) -> None:
    t = term("chat", "--resume", "sess_nope")
    assert t.finish() == 2
    assert "acp-agent: --resume sess_nope: no saved session has that id" in t.raw.decode()


# ------------------------------------------------------------------ typing during a turn


def history_texts(state_dir: str) -> list[str]:
    """The conversation's messages in the sessions of ``state_dir``, each as JSON text, in
    the order they joined the history."""
    found = []
    for log in sorted(Path(state_dir, "sessions").glob("*.jsonl")):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("r") == "message":
                found.append(json.dumps(record))
    return found


def test_enter_steers_the_running_turn_and_tab_queues_the_next_prompt(
    term: Start, tmp_path: Path, workspace: str, state_dir: str,
) -> None:
    wait = "while [ ! -e go.flag ]; do sleep 0.05; done; echo released"
    env = script(tmp_path, [
        {"text": "working on it"},
        {"tool_call": {"name": "run_command", "arguments": {"command": wait}}},
    ], [{"text": "heard you"}], [{"text": "the queued one ran"}])
    t = term("chat", "--yes", env=env)
    t.wait_for(lambda text: "Enter steers it, Tab queues" in text and at_prompt(text))
    t.type("go")
    t.wait_for("▶ Run")  # the command runs, waiting for its flag
    t.key("steer lefx\x7ft")  # typed keys are drawn under the progress, not echoed
    t.key("\x1b[D")  # an arrow is no text
    t.wait_for("› steer left▏   Enter steers · Tab queues")
    t.key("\r")
    t.wait_for("↳ steered: the model reads it at its next request")
    t.key("and later this\t")
    t.wait_for("queued for after this turn: and later this")
    Path(workspace, "go.flag").touch()
    t.wait_for(lambda text: text.count("— stop: end_turn") >= 2 and at_prompt(text))
    screen = t.text()
    lines = screen.splitlines()
    assert "> steer left" in lines and "> and later this" in lines  # each shown as said
    assert screen.index("heard you") < screen.index("> and later this") < screen.index(
        "the queued one ran")
    assert "›" not in screen  # the typed line went with the turn's progress
    t.ctrl_d()
    assert t.finish() == 0
    # the steer reached the model after the command's result, before its next answer
    history = history_texts(state_dir)
    at = {word: next(i for i, m in enumerate(history) if word in m)
          for word in ("released", "steer left", "heard you")}
    assert at["released"] < at["steer left"] < at["heard you"]
    assert prompts(state_dir) == ["go", "and later this"]


def test_a_cancel_puts_the_queued_messages_back_in_the_prompt(
    term: Start, tmp_path: Path, state_dir: str,
) -> None:
    env = script(tmp_path, [{"text": "working on it"}, {"hang": True}],
                 [{"text": "sent after all"}])
    t = term("chat", env=env)
    t.wait_for(at_prompt)
    t.type("go")
    t.wait_for("working on it")
    t.key("first\t")
    t.wait_for("queued for after this turn: first")
    t.key("second\t")
    t.wait_for("queued for after this turn: second")
    t.key("half typ")
    t.wait_for("› half typ")
    t.ctrl_c()
    t.wait_for("— stop: cancelled")
    t.wait_for("the queued messages are back in the prompt (Enter sends them)")
    t.wait_for(lambda text: text.splitlines()[-3:] == ["> first", "  second", "  half typ"])
    t.key("e\r")
    t.wait_for(lambda text: "sent after all" in text and at_prompt(text))
    t.ctrl_d()
    assert t.finish() == 0
    assert prompts(state_dir) == ["go", "first\nsecond\nhalf type"]
