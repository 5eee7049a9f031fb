"""run_command's editor route: ``terminal/create`` → embed the terminal in the tool call →
``terminal/wait_for_exit`` raced against the timeout → ``terminal/kill`` on timeout or
cancel → ``terminal/output`` → ``terminal/release`` always."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from msgspec import UnsetType

from .. import log
from ..errors import RemoteError, ToolError
from ..protocol import types as t
from .base import ToolContext
from .budget import TERMINAL_OUTPUT_BYTES
from .output import Capture, Captured
from .shell import CommandResult

#: Bound on each terminal/kill and terminal/release during cleanup.
CLEANUP_TIMEOUT = 5.0

R = TypeVar("R")

_background: set[asyncio.Task[None]] = set()


def _unset_none(value: Any) -> Any:
    return None if isinstance(value, UnsetType) else value


async def _finish_terminal(ctx: ToolContext, terminal_id: str, kill: bool) -> None:
    """kill (if asked) then release, each bounded in time; errors are logged."""
    client, sid = ctx.client, ctx.session_id

    async def step(method: str, params: Any, result: type[Any]) -> None:
        try:
            await asyncio.wait_for(client.call(method, params, result), CLEANUP_TIMEOUT)
        except Exception as exc:
            log.warning("terminal cleanup failed", method=method, error=str(exc))

    if kill:
        await step("terminal/kill", t.KillTerminalRequest(session_id=sid, terminal_id=terminal_id),
                   t.KillTerminalResponse | None)  # type: ignore[arg-type]
    await step("terminal/release",
               t.ReleaseTerminalRequest(session_id=sid, terminal_id=terminal_id),
               t.ReleaseTerminalResponse | None)  # type: ignore[arg-type]


def _in_background(make: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    async def run() -> None:
        await make()

    task = asyncio.get_running_loop().create_task(run())
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


async def run_terminal(
    ctx: ToolContext, argv: Sequence[str], cwd: str, timeout: float
) -> CommandResult:
    """Run ``argv`` (the same command line as the local route, the sandbox's around it
    when there is one: the editor applies the same fence) in an editor terminal; the
    editor is asked for TERMINAL_OUTPUT_BYTES of output, cut for the model on our side
    (head and tail; all of it saved when cut)."""
    client, sid = ctx.client, ctx.session_id
    create = asyncio.ensure_future(client.call(
        "terminal/create",
        t.CreateTerminalRequest(session_id=sid, command=argv[0], args=list(argv[1:]),
                                cwd=cwd, output_byte_limit=TERMINAL_OUTPUT_BYTES),
        t.CreateTerminalResponse,
    ))
    try:
        created = await asyncio.shield(create)
    except asyncio.CancelledError:
        def late(fut: asyncio.Future[Any]) -> None:  # created after all: clean it up
            if not fut.cancelled() and fut.exception() is None:
                tid = fut.result().terminal_id
                _in_background(lambda: _finish_terminal(ctx, tid, True))

        create.add_done_callback(late)
        raise
    except RemoteError as exc:
        raise ToolError(f"the editor could not start a terminal: {exc.message}") from None
    tid: str = created.terminal_id

    def term(request: Callable[..., R]) -> R:
        return request(session_id=sid, terminal_id=tid)

    kill = False
    try:
        await ctx.emit(t.ToolCallUpdateSessionUpdate(
            tool_call_id=ctx.tool_call_id, content=[t.Terminal(terminal_id=tid)]))
        exit_code = sig = None
        timed_out = False
        try:
            async with asyncio.timeout(timeout):
                status = await client.call("terminal/wait_for_exit",
                                           term(t.WaitForTerminalExitRequest),
                                           t.WaitForTerminalExitResponse)
            exit_code, sig = _unset_none(status.exit_code), _unset_none(status.signal)
        except TimeoutError:
            timed_out = True
            await client.call("terminal/kill", term(t.KillTerminalRequest),
                              t.KillTerminalResponse | None)  # type: ignore[arg-type]
        out = await client.call("terminal/output", term(t.TerminalOutputRequest),
                                t.TerminalOutputResponse)
        if timed_out and isinstance(out.exit_status, t.TerminalExitStatus):
            exit_code = _unset_none(out.exit_status.exit_code)
            sig = _unset_none(out.exit_status.signal)
        # the editor drops the beginning beyond output_byte_limit: the model is told so
        got = await asyncio.to_thread(_captured, str(out.output), ctx.outputs, out.truncated)
        return CommandResult(exit_code, sig, got.text, got.cut, timed_out, tid, got.saved)
    except asyncio.CancelledError:
        kill = True
        raise
    except RemoteError as exc:
        kill = True
        raise ToolError(f"the editor's terminal failed: {exc.message}") from None
    finally:
        # Always release (after kill when cancelled), even if this task is cancelled again.
        await asyncio.shield(_in_background(lambda: _finish_terminal(ctx, tid, kill)))


def _captured(output: str, outputs: str | None, truncated: bool) -> Captured:
    capture = Capture(outputs)
    capture.feed(output.encode("utf-8", "surrogatepass"))
    lost = (f"The editor's terminal kept only the last {TERMINAL_OUTPUT_BYTES:,} bytes of "
            "the output; its beginning is lost") if truncated else None  # fmt: skip
    return capture.finish(lost_head=lost)
