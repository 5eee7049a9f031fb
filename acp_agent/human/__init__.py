"""The human mode: ``acp-agent run "PROMPT"`` and ``acp-agent chat``.

It drives an agent subprocess through the protocol, exactly as an editor would, and
renders what a person wants to see: streamed text, thoughts dimmed, the plan, tool calls
with their status and diffs, permission questions answered at the keyboard, a progress
line while the model works, and the usage at the end. This package owns the terminal, so
it prints; the agent itself never does.

The protocol side is the project's own: a :class:`~acp_agent.rpc.connection.Connection`
over the subprocess's pipes, speaking the typed messages of ``protocol.types``. It
answers ``session/request_permission`` and takes ``session/update``; anything else the
agent asks (``fs/*``, ``terminal/*``: not advertised) gets "method not found".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from ..errors import InvalidParams, RemoteError
from ..protocol import UNSET, UnsetType, Wire
from ..protocol import types as t
from ..rpc.connection import Connection, ConnectionClosed, Route
from ..rpc.framing import LineSink, LineSource, open_child
from ._render import Renderer, Style, block_text

__all__ = ["HumanClient", "Keyboard", "Renderer", "Spinner", "Style", "block_text", "run_human"]

PERMISSION_KEYS: dict[str, t.PermissionOptionKind] = {
    "a": "allow_once",
    "A": "allow_always",
    "r": "reject_once",
    "R": "reject_always",
}
CLIENT_INFO = t.Implementation(name="acp-agent-human", version="1")


class InitializeResult(Wire):
    """What we read of the agent's ``t.InitializeResponse``. That generated type encodes
    but does not decode (its ``authMethods`` union mixes a tagged and an untagged variant;
    the generator makes only what the agent receives decodable), so this view does."""

    protocol_version: t.ProtocolVersion
    agent_info: t.Implementation | UnsetType | None = UNSET


class Keyboard:
    """Lines typed at stdin, read one at a time in a worker thread.

    A read whose reader gave up (a question the agent withdrew) stays pending and goes to
    the next reader, so no typed line is lost and two threads never compete for stdin."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdin
        self._next: asyncio.Future[str] | None = None

    def isatty(self) -> bool:
        return self.stream.isatty()

    async def readline(self) -> str:
        """The next line with its newline; ``""`` at end of input."""
        if self._next is None:
            self._next = asyncio.ensure_future(asyncio.to_thread(self.stream.readline))
        line = await asyncio.shield(self._next)
        self._next = None
        return line


class Spinner:
    """A progress line (``⠋ working…``) on a terminal's stderr while a turn runs.

    It is drawn only at the start of a line (``at_line_start``: never over streamed text)
    and never while :meth:`held` (a permission question is being asked)."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, stream: TextIO, at_line_start: Callable[[], bool]) -> None:
        self.stream = stream
        self.at_line_start = at_line_start
        self.shown = False
        self._holds = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.stream.isatty():
            self._task = asyncio.create_task(self._spin())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()  # it draws only after a sleep, so it draws no more
            self._task = None
        self.clear()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Cleared now, and not drawn again until the block is left."""
        self._holds += 1
        self.clear()
        try:
            yield
        finally:
            self._holds -= 1

    async def _spin(self) -> None:
        for frame in itertools.cycle(self.FRAMES):
            if not self._holds and self.at_line_start():
                self.stream.write(f"\r{frame} working…")
                self.stream.flush()
                self.shown = True
            await asyncio.sleep(0.1)


class HumanClient:
    """An ACP client for a person at a terminal, over a :class:`Connection`."""

    def __init__(
        self,
        reader: LineSource,
        writer: LineSink,
        renderer: Renderer,
        *,
        yes: bool,
        keyboard: Keyboard | None = None,
        err: TextIO | None = None,
    ) -> None:
        self.r = renderer
        self.yes = yes
        self.keyboard = keyboard if keyboard is not None else Keyboard()
        self.err = err if err is not None else sys.stderr
        self.spinner = Spinner(self.err, lambda: renderer.kind is None)
        self.proc: asyncio.subprocess.Process | None = None
        self._writer = writer
        self._asking = asyncio.Lock()  # one question at a time
        self._cancels: set[asyncio.Task[None]] = set()
        self.conn = Connection(
            reader,
            writer,
            {
                "session/update": Route(t.SessionNotification, self._on_update, notification=True),
                "session/request_permission": Route(
                    t.RequestPermissionRequest, self._on_permission
                ),
            },
        )
        self._serving = asyncio.create_task(self._serve())

    @classmethod
    async def spawn(cls, agent_args: list[str], renderer: Renderer, *, yes: bool) -> HumanClient:
        """Start ``python -m acp_agent AGENT_ARGS`` (its stderr is ours) and connect."""
        proc, reader, writer = await open_child(sys.executable, "-m", "acp_agent", *agent_args)
        client = cls(reader, writer, renderer, yes=yes)
        client.proc = proc
        return client

    async def _serve(self) -> None:
        try:
            await self.conn.serve()
        finally:  # the agent's stdout closed: whatever still waits on it fails now
            await self.conn.close()

    # ------------------------------------------------------------------ the agent asks

    async def _on_update(self, params: t.SessionNotification) -> None:
        self.spinner.clear()
        self.r.update(params.update)

    async def _on_permission(self, req: t.RequestPermissionRequest) -> t.RequestPermissionResponse:
        options = {o.kind: o.option_id for o in req.options}
        if not options:
            raise InvalidParams("Invalid params: no permission options")
        kind: t.PermissionOptionKind
        if self.yes:
            kind = "allow_once"
        elif not self.keyboard.isatty():
            kind = "reject_once"
        else:
            kind = await self._ask(req.tool_call.title or "a tool call")
        option = options.get(kind) or next(iter(options.values()))
        return t.RequestPermissionResponse(outcome=t.SelectedPermissionOutcome(option_id=option))

    async def _ask(self, title: str) -> t.PermissionOptionKind:
        question = f"\nAllow {title}? [a]llow once, [A]lways, [r]eject, [R]eject always: "
        async with self._asking:
            with self.spinner.held():
                try:
                    while True:
                        self.err.write(self.r.s.bold(question))
                        self.err.flush()
                        answer = (await self.keyboard.readline()).strip()
                        if answer in PERMISSION_KEYS:
                            return PERMISSION_KEYS[answer]
                        if answer.lower() in ("y", "yes"):
                            return "allow_once"
                        if answer.lower() in ("n", "no", ""):
                            return "reject_once"
                except asyncio.CancelledError:  # the agent withdrew it (the turn ended)
                    self.err.write("\n")
                    self.err.flush()
                    raise

    # ------------------------------------------------------------------ we ask

    async def initialize(self) -> InitializeResult:
        caps = t.ClientCapabilities(
            fs=t.FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False,
        )
        return await self.conn.request(
            "initialize",
            t.InitializeRequest(
                protocol_version=1, client_capabilities=caps, client_info=CLIENT_INFO
            ),
            InitializeResult,
        )

    async def new_session(self, cwd: str) -> str:
        session = await self.conn.request(
            "session/new", t.NewSessionRequest(cwd=cwd, mcp_servers=[]), t.NewSessionResponse
        )
        return session.session_id

    async def prompt(self, session_id: str, text: str) -> t.PromptResponse:
        self.spinner.start()
        try:
            result = await self.conn.request(
                "session/prompt",
                t.PromptRequest(session_id=session_id, prompt=[t.TextContent(text=text)]),
                t.PromptResponse,
            )
        finally:
            self.spinner.stop()
        self.r.finish(result)
        return result

    async def cancel(self, session_id: str) -> None:
        await self.conn.notify("session/cancel", t.CancelNotification(session_id=session_id))

    def cancel_soon(self, session_id: str) -> None:
        """:meth:`cancel` from a signal handler."""
        task = asyncio.create_task(self.cancel(session_id))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def close(self) -> None:
        """End the agent's input, wait for it to exit and for its output to end."""
        await self._writer.aclose()
        if self.proc is not None:
            await self.proc.wait()
        await self._serving


def error_text(exc: RemoteError | ConnectionClosed) -> str:
    """The one line a person sees when the agent failed us."""
    return exc.message if isinstance(exc, RemoteError) else "the agent exited"


async def run_human(agent_args: list[str], prompt: str | None, *, yes: bool, cwd: str) -> int:
    """``prompt`` runs one turn; ``None`` starts an interactive chat."""
    client = await HumanClient.spawn(agent_args, Renderer(sys.stdout), yes=yes)
    try:
        return await _converse(client, prompt, cwd)
    except (RemoteError, ConnectionClosed) as exc:
        sys.stderr.write(f"acp-agent: {error_text(exc)}\n")
        return 1
    finally:
        await client.close()


async def _converse(client: HumanClient, prompt: str | None, cwd: str) -> int:
    await client.initialize()
    sid = await client.new_session(cwd)
    if prompt is not None:
        result = await _prompt_with_ctrl_c(client, sid, prompt)
        return 0 if result.stop_reason in ("end_turn", "cancelled") else 1
    sys.stderr.write("acp-agent chat — Ctrl-D to quit, Ctrl-C cancels a turn\n")
    out = client.r.out
    while True:
        out.write(client.r.s.bold("> "))
        out.flush()
        line = await client.keyboard.readline()
        if not line:
            return 0
        if line.strip():
            await _prompt_with_ctrl_c(client, sid, line.strip())


async def _prompt_with_ctrl_c(client: HumanClient, sid: str, text: str) -> t.PromptResponse:
    """Ctrl-C during a turn sends session/cancel instead of killing the process."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, client.cancel_soon, sid)
    try:
        return await client.prompt(sid, text)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
