"""run_command: in an editor terminal when the client offers ``terminal/*`` (the user
watches live output), else in a local subprocess in its own process group; either way as
``<the user's shell> -c <command>`` (``usershell``), inside the call's sandbox
(``ToolContext.sandbox``, at the level the mode gives) unless the model asked to leave it
(``outside_sandbox``, a reason: the user is always asked), the output cut for the model and
saved whole when cut (``output``). A command that timed out or was killed by a signal is
an error result. A sandboxed command that failed on what looks like the sandbox's refusal
(a read-only file system, no network) is said to have been, with how to ask to leave it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from msgspec import Meta

from ..protocol import types as t
from ._common import short, text_content
from .base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput
from .budget import COMMAND_MAX_TOKENS
from .sandbox import Policy
from .shell import CommandResult, run_local
from .terminal import run_terminal
from .usershell import user_shell

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 30 * 60_000


def _status(r: CommandResult, timeout: float) -> str:
    if r.timed_out:
        return f"Timed out after {timeout:g} s; the command was killed."
    if r.signal:
        return f"Killed by signal {r.signal}."
    return f"Exit code: {r.exit_code if r.exit_code is not None else 'unknown'}"


SANDBOXED = (
    " Depending on the permission mode it may run in a sandbox (writes only inside the"
    " workspace and to $TMPDIR, no network); its title says so."
)


class RunCommandArgs(Arguments):
    command: Annotated[str, Meta(min_length=1, description="The shell command line.")]
    cwd: Annotated[str, Meta(description="Working directory (default: the workspace).")] = ""
    timeout_ms: Annotated[
        int,
        Meta(ge=1, le=MAX_TIMEOUT_MS, description=f"Timeout in ms (default {DEFAULT_TIMEOUT_MS})."),
    ] = DEFAULT_TIMEOUT_MS
    outside_sandbox: Annotated[str, Meta(description=(
        "Only when the sandbox blocked this command (or surely would): why it must run "
        "outside the sandbox. The user is asked, and shown this reason."
    ))] = ""  # fmt: skip


def describe_run_command(shell: str) -> str:
    return (
        f"Run a command line as `{shell} -c <command>` (not interactive: stdin is empty; "
        "the environment section says with which environment variables) and return its "
        "combined stdout/stderr and exit code. The output you get is at most "
        f"~{COMMAND_MAX_TOKENS:,} tokens: its beginning and its end; when the middle is cut, "
        "all of it is saved to a file whose path the result gives (read_file or grep it "
        f"rather than running the command again). Times out after {DEFAULT_TIMEOUT_MS // 1000}"
        " s unless timeout_ms is given; a command that times out or is killed is an error. "
        "Background jobs still holding the output are stopped when it ends."
    )


class RunCommand(BuiltinTool[RunCommandArgs]):
    name = "run_command"
    kind: ToolKind = "execute"
    arguments = RunCommandArgs

    @property
    def description(self) -> str:  # type: ignore[override]
        return describe_run_command(user_shell().path) + SANDBOXED

    def describe(self, args: RunCommandArgs, ctx: ToolContext) -> CallInfo:
        title = f"Run `{short(args.command, 100)}`"
        cwd = ctx.resolve(args.cwd or ".")
        if cwd != ctx.resolve(ctx.cwd):
            title += f" in {ctx.display(cwd)}"
        level = _level(args, ctx)
        reason = args.outside_sandbox.strip()
        if reason:
            title += f" outside the sandbox (why: {short(reason, 160)})"
        elif level != "off":
            title += f" (sandboxed: {level})"
        fenced = None if level == "off" else level
        return CallInfo(title, "execute", (cwd,), command=args.command, sandbox=fenced,
                        leaving=bool(reason))  # fmt: skip

    async def run(self, args: RunCommandArgs, ctx: ToolContext) -> ToolOutput:
        command = args.command
        cwd = ctx.resolve(args.cwd or ".")
        timeout = args.timeout_ms / 1000
        level = _level(args, ctx)
        argv = user_shell().argv(command)
        if ctx.sandbox is not None and level != "off":
            # the same command line on every route; in a worker thread: the first command
            # in a root walks it for nested repositories (``sandbox.nested_git``)
            argv = await asyncio.to_thread(ctx.sandbox.wrap, argv, cwd)
        note = ""
        if ctx.client.allows("terminal/create"):
            result = await run_terminal(ctx, argv, cwd, timeout)
        else:
            env = ctx.env
            if ctx.login_env is not None:
                login = await ctx.login_env()
                if login.env is not None:
                    env = login.env
                else:
                    note = (f"\n[Your login shell's environment could not be read "
                            f"({login.problem}); the command ran with the agent's.]")  # fmt: skip
            result = await run_local(argv, cwd, timeout, env, ctx.outputs)
        status = _status(result, timeout) + note
        if ctx.sandbox is not None and level != "off" and (result.exit_code or result.signal):
            status += denied(result.output, ctx.sandbox.policy)
        body = result.output.rstrip("\n") or "(no output)"
        raw = {"exitCode": result.exit_code, "signal": result.signal, "output": result.output,
               "truncated": result.truncated, "timedOut": result.timed_out,
               "savedOutput": result.saved, "sandbox": level}
        if result.terminal_id is not None:  # keep the live terminal in the final content
            content: list[Any] = [t.Terminal(terminal_id=result.terminal_id),
                                  text_content(status)]
        else:
            fence = "```" + "`" * _longest_backticks(body)
            content = [text_content(f"{fence}\n{body}\n{fence}\n{status}")]
        failed = result.timed_out or result.signal is not None
        return ToolOutput(text=f"{body}\n\n{status}", content=content, raw_output=raw,
                          is_error=failed)


def _level(args: RunCommandArgs, ctx: ToolContext) -> str:
    """The sandbox level this call's command runs at (``off`` when it asks to leave)."""
    if ctx.sandbox is None or args.outside_sandbox.strip():
        return "off"
    return ctx.sandbox.level


#: What a command says when the sandbox refused it something.
_REFUSALS = (
    "Read-only file system", "Network is unreachable", "Temporary failure in name resolution",
    "Name or service not known", "Could not resolve host", "Connection refused",
    "No address associated with hostname", "getaddrinfo", "bwrap: ",
)  # fmt: skip


def denied(output: str, policy: Policy) -> str:
    """A note for a sandboxed command that failed, when its output shows what looks like
    the sandbox's refusal ("" otherwise)."""
    line = next((ln.strip() for ln in output.splitlines() if any(r in ln for r in _REFUSALS)), "")
    if not line:
        return ""
    what = "The sandbox could not start it" if line.startswith("bwrap: ") else (
        "The sandbox may have refused it")  # fmt: skip
    return (
        f"\n[This command ran in the sandbox ({policy.words()}). {what}: "
        f"{short(line, 200)}. If it must run outside the sandbox, call run_command again with "
        "`outside_sandbox` saying why; the user will be asked.]"
    )


def _longest_backticks(text: str) -> int:
    run = best = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return max(0, best - 2)
