"""run_command: in an editor terminal when the client offers ``terminal/*`` (the user
watches live output), else in a local subprocess in its own process group."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from ..protocol import types as t
from ..providers.base import ToolSpec
from ._common import BaseTool, opt_int, prop, req_str, resolve_opt_dir, short, text_content
from .base import Access, ToolContext, ToolKind, ToolOutput
from .shell import CommandResult, run_local
from .terminal import run_terminal

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 30 * 60_000


_SHELL_OPERATORS = frozenset(";&|$`()<>\n")


def _first_word(command: str) -> str:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return words[0] if words else ""


def _status(r: CommandResult, timeout: float) -> str:
    if r.timed_out:
        return f"Timed out after {timeout:g} s; the command was killed."
    if r.signal:
        return f"Killed by signal {r.signal}."
    return f"Exit code: {r.exit_code if r.exit_code is not None else 'unknown'}"


class RunCommand(BaseTool):
    kind: ToolKind = "execute"
    spec = ToolSpec(
        name="run_command",
        description=(
            "Run a shell command (`sh -c`) and return its combined stdout/stderr and exit "
            "code. Non-interactive (stdin is empty). Output is capped at 64 KiB (head and "
            f"tail kept). Times out after {DEFAULT_TIMEOUT_MS // 1000} s unless timeout_ms "
            "is given; background jobs still holding the output are stopped when it ends."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command line."},
                "cwd": prop("string", "Working directory (default: the workspace)."),
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS,
                               "description": f"Timeout in ms (default {DEFAULT_TIMEOUT_MS})."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    )

    def title(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        title = f"Run `{short(req_str(args, 'command'), 100)}`"
        cwd = resolve_opt_dir(args, "cwd", ctx)
        if cwd != ctx.resolve(ctx.cwd):
            title += f" in {ctx.display(cwd)}"
        return title

    def access(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[Access, list[str]]:
        req_str(args, "command")
        return "execute", [resolve_opt_dir(args, "cwd", ctx)]

    def permission_key(self, args: Mapping[str, Any]) -> str:
        """``run_command:<program>`` for a plain command; a command with shell operators
        (``git status && rm -rf ~``) is only ever remembered as that exact command."""
        command = str(args.get("command") or "").strip()
        if any(ch in command for ch in _SHELL_OPERATORS):
            return f"run_command$ {command}"
        word = _first_word(command)
        return f"run_command:{word}" if word else "run_command"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        command = req_str(args, "command")
        cwd = resolve_opt_dir(args, "cwd", ctx)
        timeout_ms = min(opt_int(args, "timeout_ms", minimum=1) or DEFAULT_TIMEOUT_MS,
                         MAX_TIMEOUT_MS)
        timeout = timeout_ms / 1000
        if ctx.client.allows("terminal/create"):
            result = await run_terminal(ctx, command, cwd, timeout)
        else:
            result = await run_local(command, cwd, timeout)
        status = _status(result, timeout)
        body = result.output.rstrip("\n") or "(no output)"
        raw = {"exitCode": result.exit_code, "signal": result.signal, "output": result.output,
               "truncated": result.truncated, "timedOut": result.timed_out}
        if result.terminal_id is not None:  # keep the live terminal in the final content
            content: list[Any] = [t.Terminal(terminal_id=result.terminal_id),
                                  text_content(status)]
        else:
            fence = "```" + "`" * _longest_backticks(body)
            content = [text_content(f"{fence}\n{body}\n{fence}\n{status}")]
        return ToolOutput(text=f"{body}\n\n{status}", content=content, raw_output=raw)


def _longest_backticks(text: str) -> int:
    run = best = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return max(0, best - 2)
