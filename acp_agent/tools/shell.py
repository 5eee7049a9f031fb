"""run_command's local route: the command line (the user's shell: ``usershell``, or the
sandbox's command line around it: ``tools.sandbox``) in its own process group, its output
captured for the model (:class:`~.output.Capture`: head and tail, all of it saved when
cut), the whole group killed on timeout or cancellation (in a sandbox, ``bwrap`` is the
group's leader: killing it kills everything inside)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import ToolError
from .output import Capture

#: SIGTERM → SIGKILL grace on timeout.
TERM_GRACE = 2.0
#: After the shell exits, how long background jobs may keep the output pipe open.
PIPE_GRACE = 0.5


@dataclass(slots=True)
class CommandResult:
    exit_code: int | None
    signal: str | None
    output: str
    truncated: bool
    timed_out: bool
    terminal_id: str | None = None
    saved: str | None = None
    """The file holding all of the output, when the model's copy was cut."""


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """The shell's exit status. (``proc.wait()`` on Python 3.11 also waits for the pipes to
    close, which a background job can hold open indefinitely.)"""
    delay = 0.002
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return proc.returncode


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL it after a grace period, reap the leader."""
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_exited(proc), TERM_GRACE)
    _signal_group(proc.pid, signal.SIGKILL)  # stragglers that ignored SIGTERM
    await _exited(proc)


async def _pump(stream: asyncio.StreamReader, capture: Capture) -> None:
    while chunk := await stream.read(65536):
        capture.feed(chunk)


#: Cleanups of commands whose call was cancelled while they started (see run_local).
_background: set[asyncio.Task[None]] = set()


def _kill_when_started(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """The call was cancelled while ``spawn`` was starting the command (the shell may
    already be running it): once it has started, kill its whole process group."""

    async def kill() -> None:
        try:
            proc = await spawn
        except Exception:  # it did not start
            return
        _signal_group(proc.pid, signal.SIGKILL)
        await _exited(proc)

    task = asyncio.ensure_future(kill())
    _background.add(task)
    task.add_done_callback(_background.discard)


async def run_local(
    argv: Sequence[str], cwd: str, timeout: float, env: Mapping[str, str] | None = None,
    outputs: str | None = None,
) -> CommandResult:
    """Run ``argv``; ``outputs``: the directory where a cut output is saved whole."""
    if not os.path.isdir(cwd):
        raise ToolError(f"working directory not found: {cwd}")
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True, env=env,
    ))
    try:
        proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while starting: asyncio would kill the shell alone, leaving what it
        # had already started running. Let it start, then kill the whole group.
        _kill_when_started(spawn)
        raise
    except OSError as exc:
        raise ToolError(f"cannot start the command: {exc}") from None
    assert proc.stdout is not None
    capture = Capture(outputs)
    reader = asyncio.create_task(_pump(proc.stdout, capture))
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout):
                await _exited(proc)
        except TimeoutError:
            timed_out = True
            await _terminate(proc)
        # Background jobs may still hold the pipe: give them a moment, then end them.
        done, _ = await asyncio.wait({reader}, timeout=PIPE_GRACE)
        if not done:
            _signal_group(proc.pid, signal.SIGKILL)
            done, _ = await asyncio.wait({reader}, timeout=PIPE_GRACE)
            if not done:
                reader.cancel()
    except BaseException:  # cancelled: kill the whole group before unwinding
        _signal_group(proc.pid, signal.SIGKILL)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(_exited(proc), 2.0)
        raise
    code = proc.returncode
    got = await asyncio.to_thread(capture.finish)
    sig = signal.Signals(-code).name if code is not None and code < 0 else None
    return CommandResult(code if sig is None else None, sig, got.text, got.cut, timed_out,
                         saved=got.saved)  # fmt: skip
