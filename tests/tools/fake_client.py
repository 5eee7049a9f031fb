"""A recording :class:`~acp_agent.client.Client` for the tool tests.

``fs/*`` is served from an in-memory dict of editor buffers; ``terminal/*`` really runs the
command in a subprocess (own process group) so output and exit codes are real. Every call
is checked against its capability (a call without one fails the test), its params are
validated against the official ACP schema, and its result goes through a JSON round trip
decoded with the caller's ``result_type`` (as the real connection does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from acp_agent.errors import RemoteError
from acp_agent.protocol import types as t
from acp_agent.tools.base import ToolContext

from ..limits import WAIT
from ..schema_check import validate_def

_REQUESTS = {
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
}


def wire(obj: Any) -> Any:
    """What ``obj`` looks like on the wire (camelCase keys, UNSET omitted)."""
    return json.loads(msgspec.json.encode(obj))


@dataclass
class _Term:
    proc: asyncio.subprocess.Process
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None
    released: bool = False
    killed: bool = False


class FakeClient:
    def __init__(
        self,
        *,
        read: bool = False,
        write: bool = False,
        terminal: bool = False,
        files: dict[str, str] | None = None,
        write_result: Any = None,
    ) -> None:
        self.capabilities = t.ClientCapabilities(
            fs=t.FileSystemCapabilities(read_text_file=read, write_text_file=write),
            terminal=terminal,
        )
        self.files: dict[str, str] = dict(files or {})
        self.write_result = write_result  # None: the client answers `null`
        self.events: list[tuple[str, Any]] = []  # ("call", (method, params)) / ("emit", update)
        self.terminals: dict[str, _Term] = {}
        self._slow: set[asyncio.Future[Any]] = set()
        self.fail: dict[str, RemoteError] = {}
        self.gates: dict[str, asyncio.Event] = {}  # a method answers once its gate is set

    # ------------------------------------------------------------------ Client protocol

    def allows(self, method: str) -> bool:
        caps = self.capabilities
        fs = caps.fs if isinstance(caps.fs, t.FileSystemCapabilities) else None
        if method == "fs/read_text_file":
            return bool(fs and fs.read_text_file)
        if method == "fs/write_text_file":
            return bool(fs and fs.write_text_file)
        if method.startswith("terminal/"):
            return caps.terminal is True
        return True

    async def session_update(self, session_id: str, update: t.SessionUpdate) -> None:
        self.events.append(("emit", update))

    async def request_permission(
        self, session_id: str, tool_call: t.ToolCallUpdate, options: Sequence[t.PermissionOption]
    ) -> t.RequestPermissionOutcome:
        raise AssertionError("tools never ask for permission themselves")

    async def call(self, method: str, params: Any, result_type: Any) -> Any:
        assert self.allows(method), f"{method} called but its capability was not advertised"
        self.events.append(("call", (method, params)))
        errors = validate_def(_REQUESTS[method], wire(params))
        assert not errors, errors
        if method in self.fail:
            raise self.fail[method]
        handler = getattr(self, "_" + method.replace("/", "_"))
        if method in self.gates:
            # an editor that is slow to answer still does the work when the caller gives up
            task = asyncio.ensure_future(self._gated(self.gates[method], handler(params)))
            self._slow.add(task)
            task.add_done_callback(self._slow.discard)
            result = await asyncio.shield(task)
        else:
            result = await handler(params)
        return msgspec.json.decode(msgspec.json.encode(result), type=result_type)

    @staticmethod
    async def _gated(gate: asyncio.Event, work: Coroutine[Any, Any, Any]) -> Any:
        await gate.wait()
        return await work

    # ------------------------------------------------------------------ inspection

    @property
    def calls(self) -> list[tuple[str, Any]]:
        return [e[1] for e in self.events if e[0] == "call"]

    @property
    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]

    @property
    def emitted(self) -> list[Any]:
        return [e[1] for e in self.events if e[0] == "emit"]

    def context(self, cwd: str, roots: list[str] | None = None) -> ToolContext:
        async def emit(update: t.SessionUpdate) -> None:
            errors = validate_def("SessionUpdate", wire(update))
            assert not errors, errors
            self.events.append(("emit", update))

        return ToolContext(session_id="sess-1", cwd=cwd, roots=roots or [cwd], client=self,
                           tool_call_id="call-1", emit=emit)

    async def close(self) -> None:
        for gate in self.gates.values():  # answers nobody waits for any more
            gate.set()
        await asyncio.gather(*self._slow, return_exceptions=True)
        for term in self.terminals.values():
            if term.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(term.proc.pid, signal.SIGKILL)
                await term.proc.wait()
            if term.reader is not None:
                term.reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await term.reader

    # ------------------------------------------------------------------ fs

    async def _fs_read_text_file(self, p: t.ReadTextFileRequest) -> t.ReadTextFileResponse:
        if p.path not in self.files:
            raise RemoteError(-32002, f"Resource not found: {p.path}")
        lines = self.files[p.path].splitlines(keepends=True)
        first = p.line - 1 if isinstance(p.line, int) else 0
        last = first + p.limit if isinstance(p.limit, int) else None
        return t.ReadTextFileResponse(content="".join(lines[first:last]))

    async def _fs_write_text_file(self, p: t.WriteTextFileRequest) -> Any:
        self.files[p.path] = p.content
        return self.write_result

    # ------------------------------------------------------------------ terminals

    def _term(self, terminal_id: str) -> _Term:
        term = self.terminals.get(terminal_id)
        if term is None or term.released:
            raise RemoteError(-32602, f"unknown terminal {terminal_id}")
        return term

    async def _terminal_create(self, p: t.CreateTerminalRequest) -> t.CreateTerminalResponse:
        args = p.args if isinstance(p.args, list) else []
        assert isinstance(p.cwd, str) and os.path.isabs(p.cwd)
        proc = await asyncio.create_subprocess_exec(
            p.command, *args, cwd=p.cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        term = _Term(proc, p.output_byte_limit if isinstance(p.output_byte_limit, int) else None)
        term.reader = asyncio.create_task(self._pump(term))
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = term
        return t.CreateTerminalResponse(terminal_id=terminal_id)

    @staticmethod
    async def _pump(term: _Term) -> None:
        assert term.proc.stdout is not None
        while chunk := await term.proc.stdout.read(65536):
            term.output += chunk
            if term.limit is not None and len(term.output) > term.limit:
                del term.output[: len(term.output) - term.limit]
                term.truncated = True

    @staticmethod
    def _status(term: _Term) -> tuple[int | None, str | None]:
        code = term.proc.returncode
        if code is not None and code < 0:
            return None, signal.Signals(-code).name
        return code, None

    async def _terminal_wait_for_exit(self, p: t.WaitForTerminalExitRequest) -> Any:
        term = self._term(p.terminal_id)
        await term.proc.wait()
        if term.reader is not None:
            await asyncio.wait({term.reader}, timeout=WAIT)
        code, sig = self._status(term)
        return t.WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def _terminal_kill(self, p: t.KillTerminalRequest) -> Any:
        term = self._term(p.terminal_id)
        term.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(term.proc.pid, signal.SIGKILL)
        await term.proc.wait()
        return None

    async def _terminal_output(self, p: t.TerminalOutputRequest) -> t.TerminalOutputResponse:
        term = self._term(p.terminal_id)
        if term.proc.returncode is not None and term.reader is not None:
            await asyncio.wait({term.reader}, timeout=WAIT)
        code, sig = self._status(term)
        status = (t.TerminalExitStatus(exit_code=code, signal=sig)
                  if term.proc.returncode is not None else None)
        return t.TerminalOutputResponse(output=term.output.decode("utf-8", "replace"),
                                        truncated=term.truncated, exit_status=status)

    async def _terminal_release(self, p: t.ReleaseTerminalRequest) -> Any:
        term = self._term(p.terminal_id)
        if term.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(term.proc.pid, signal.SIGKILL)
            await term.proc.wait()
        term.released = True
        return {}


#: The ``fake`` fixture: ``fake(read=..., write=..., terminal=..., files=...)``.
MakeClient = Callable[..., FakeClient]
