"""``acp-agent run`` and ``acp-agent chat``: their flags, the prompt (words, stdin), and
the hand-over to the front end (``acp_agent.human``)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TextIO

from .flags import agent_args, agent_flags, load_config

if TYPE_CHECKING:
    import argparse

HUMAN_EPILOG = """\
The agent runs as a subprocess and is driven through the protocol, as an editor would.
Permission questions are asked at the keyboard (one key, no Enter); without a terminal
to ask on, tool calls that need permission are not run (--yes, --allow-always and --deny
decide instead). Ctrl-C cancels the running turn (at a question: rejects and cancels); a
second Ctrl-C quits. `run` keeps no session unless --save is given; `chat` keeps its
session (--no-save deletes it at the end)."""

RUN_EPILOG = """
The prompt is the words given, joined by spaces; `-`, or no words with stdin not a
terminal, reads it from stdin; with both, stdin is added to the prompt as context:
  git diff | acp-agent run review this change
When stdout is not a terminal only the answer goes to stdout; thoughts, tool calls,
notices and the footer go to stderr (--json prints every update as JSON lines).

exit status:
""" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in (
    ("0", "the turn ended normally (end_turn)"),
    ("1", "an error: the model request failed, the agent exited, or the agent ended the turn"),
    ("2", "a mistake found before the turn: flags, configuration, key, a server not there"),
    ("3", "the answer was cut short by the model's output limit (max_tokens)"),
    ("4", "the turn made limits.max-turn-requests model requests (max_turn_requests)"),
    ("5", "the model refused (refusal)"),
    ("130", "interrupted by Ctrl-C (the turn ended cancelled)"),
    ("143", "ended by SIGTERM (129: SIGHUP)"),
))  # fmt: skip




def build_human_parser(command: str) -> argparse.ArgumentParser:
    import argparse

    p = argparse.ArgumentParser(
        prog=f"acp-agent {command}",
        description="Run one prompt in the terminal."
        if command == "run"
        else "Chat with the agent in the terminal.",
        epilog=HUMAN_EPILOG + (RUN_EPILOG if command == "run" else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ..human.resume import CONTINUE, PICK

    if command == "run":
        p.add_argument("prompt", nargs="*", metavar="PROMPT",
                       help="the prompt's words (`-`: read it from stdin)")  # fmt: skip
    else:
        where = p.add_mutually_exclusive_group()
        where.add_argument(
            "--continue", "-c", dest="resume", action="store_const", const=CONTINUE,
            help="continue this directory's most recent session",
        )  # fmt: skip
        where.add_argument(
            "--resume", "-r", dest="resume", nargs="?", const=PICK, metavar="ID",
            help="resume a saved session (without ID: pick one from a list)",
        )  # fmt: skip
    policy = p.add_mutually_exclusive_group()
    policy.add_argument(
        "--yes", "-y", dest="policy", action="store_const", const="allow_once",
        help="allow each tool call that asks, once, without asking",
    )  # fmt: skip
    policy.add_argument(
        "--allow-always", dest="policy", action="store_const", const="allow_always",
        help="answer \"always\" to each question (remembered for the project, as the "
        "option says; `acp-agent permissions` lists them)",
    )  # fmt: skip
    policy.add_argument(
        "--deny", dest="policy", action="store_const", const="deny",
        help="reject each tool call that asks",
    )  # fmt: skip
    p.add_argument(
        "--save",
        action=argparse.BooleanOptionalAction,
        default=command == "chat",
        help="keep the session in the state directory "
        + ("(default for chat)" if command == "chat" else "(default for run: not kept)"),
    )
    if command == "run":
        p.add_argument(
            "--json",
            action="store_true",
            help="print the ACP updates as JSON lines (then the prompt's result) for scripts",
        )
    p.add_argument("--cwd", default=None, help="the session's directory (default: current)")
    p.add_argument(
        "--debug",
        action="store_true",
        help="show the agent's log (debug level unless --log-level: every model request"
        " with its status and time) and any traceback",
    )
    agent_flags(p.add_argument_group("agent flags"))
    return p






def main(command: str, argv: list[str]) -> int:
    args = build_human_parser(command).parse_args(argv)
    from .. import config as config_mod

    try:
        cfg = load_config(args)
    except config_mod.ConfigError as exc:
        sys.stderr.write(f"acp-agent: {exc}\n")
        return 2
    if command == "run":
        prompt = read_prompt(args.prompt, sys.stdin)
        if prompt is None:
            sys.stderr.write(
                "acp-agent: run: no prompt: give it as words (acp-agent run explain this"
                " project), or pipe it in (`-` reads it from stdin)\n"
            )
            return 2
        args.prompt = prompt
    else:
        args.prompt = None
    from ..human import main as human

    return human(command, args, cfg, agent_args(args))


def read_prompt(words: list[str], stdin: TextIO) -> str | None:
    """The prompt of ``run``: its words joined; ``-`` alone, or no words with stdin not a
    terminal, is stdin's text; words and piped stdin are the words with stdin added as
    context. ``None``: no prompt at all."""
    piped = not stdin.isatty()
    if words == ["-"]:
        return _read(stdin).rstrip("\n")
    text = " ".join(words)
    if not piped:
        return text if words else None
    data = _read(stdin)
    if not words:
        return data.rstrip("\n")
    if not data.strip():
        return text
    return f"{text}\n\n<stdin>\n{data.rstrip(chr(10))}\n</stdin>"


def _read(stdin: TextIO) -> str:
    data = os.read(stdin.fileno(), 1 << 20)
    chunks = [data]
    while data:
        data = os.read(stdin.fileno(), 1 << 20)
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")
