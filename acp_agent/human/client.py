"""The human mode's ACP client: the agent subprocess over a :class:`Connection`.

It answers ``session/request_permission`` (by the permission policy, or by asking at the
keyboard) and hands each ``session/update`` to the view; anything else the agent asks
(``fs/*``, ``terminal/*``: not advertised) gets "method not found".

The agent runs in a session of its own (``start_new_session``), so the terminal's Ctrl-C
reaches only the front end, which turns it into ``session/cancel``. Its stderr (logs,
warnings) is read here: shown dimmed with ``--debug``, otherwise kept to explain an
unexpected exit; it never draws over the screen.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
from collections.abc import Callable
from typing import Any, Literal

from ..errors import AcpError, InvalidParams
from ..protocol import UNSET, UnsetType, Wire
from ..protocol import steering as steer_wire
from ..protocol import types as t
from ..rpc.connection import Connection, Route
from ..rpc.framing import LineSink, LineSource, open_child
from ._render import View
from .keyboard import Interrupted, Keyboard

Policy = Literal["ask", "allow_once", "allow_always", "deny", "cannot_ask"]

#: The keys of a question and the option kind each one picks.
PERMISSION_KEYS: dict[str, t.PermissionOptionKind] = {
    "a": "allow_once",
    "A": "allow_always",
    "r": "reject_once",
    "R": "reject_always",
}
_YES_NO: dict[str, t.PermissionOptionKind] = {"y": "allow_once", "n": "reject_once"}
CLIENT_INFO = t.Implementation(name="acp-agent-human", version="1")
OVERWRITE_QUESTION = "undo"
"""The agent's question before ``/undo`` or ``/rewind`` overwrites files changed since the
turn (``handlers.undo.QUESTION``): asked at the keyboard even under ``--yes``."""

CANNOT_ASK = (
    "acp-agent {command} has no terminal to ask on (stdin is not one), so tool calls that "
    "need permission are not run; --yes allows them, --deny rejects them"
)


class CannotAsk(AcpError):
    """The answer to a permission request nobody can answer: the agent tells the model
    that the client could not ask the user, and why (not that the user said no)."""

    code = -32001


class InitializeResult(Wire):
    """What we read of the agent's ``t.InitializeResponse``. That generated type encodes
    but does not decode (its ``authMethods`` union mixes a tagged and an untagged variant;
    the generator makes only what the agent receives decodable), so this view does."""

    protocol_version: t.ProtocolVersion
    agent_info: t.Implementation | UnsetType | None = UNSET


class HumanClient:
    """An ACP client for a person at a terminal, over a :class:`Connection`."""

    def __init__(
        self,
        reader: LineSource,
        writer: LineSink,
        view: View,
        *,
        policy: Policy = "ask",
        keyboard: Keyboard | None = None,
        command: str = "run",
    ) -> None:
        self.view = view
        self.policy = policy
        self.command = command
        self.keyboard = keyboard if keyboard is not None else Keyboard()
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.show_log = False
        self.session_id: str | None = None
        self.modes: t.SessionModeState | None = None
        self.sandbox: str | None = None
        self.steering = False  # the agent takes ``_session/steering`` (its initialize says so)
        """The level ``auto`` mode runs commands at (``None``: the agent has no sandbox)."""
        self.on_ask_cancel: Callable[[], None] = lambda: None
        self.eof = False  # Ctrl-D at a question: the chat ends after the turn
        self.replayed: list[t.SessionUpdate] | None = None  # a load's updates, kept
        self._writer = writer
        self._asking = asyncio.Lock()  # one question at a time
        self._tasks: set[asyncio.Task[None]] = set()
        self._stderr_task: asyncio.Task[None] | None = None
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
    async def spawn(
        cls, agent_args: list[str], view: View, *, policy: Policy, command: str, debug: bool
    ) -> HumanClient:
        """Start ``python -m acp_agent AGENT_ARGS`` in a session of its own and connect."""
        proc, reader, writer = await open_child(
            sys.executable, "-m", "acp_agent", *agent_args,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        client = cls(reader, writer, view, policy=policy, command=command)
        client.proc = proc
        client.show_log = debug
        client._stderr_task = asyncio.create_task(client._read_stderr())
        return client

    async def _serve(self) -> None:
        try:
            await self.conn.serve()
        finally:  # the agent's stdout closed: whatever still waits on it fails now
            await self.conn.close()

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            text = line.decode("utf-8", "replace").rstrip()
            self.stderr_tail.append(text)
            if self.show_log and text:
                self.view.note(text, "debug")

    def exit_reason(self) -> str:
        """Why the agent went away, in one line (its own last words when it left any)."""
        code = self.proc.returncode if self.proc is not None else None
        last = next((line for line in reversed(self.stderr_tail) if line.strip()), "")
        if last.startswith("acp-agent: "):
            return last.removeprefix("acp-agent: ")
        status = (
            f" (killed by signal {-code})" if code is not None and code < 0
            else f" (status {code})" if code else ""
        )  # fmt: skip
        return f"the agent exited unexpectedly{status}; --debug shows its log"

    # ------------------------------------------------------------------ the agent asks

    async def _on_update(self, params: t.SessionNotification) -> None:
        update = params.update
        self.view.session_id = params.session_id
        if isinstance(update, t.CurrentModeUpdate) and self.modes is not None:
            self.modes.current_mode_id = update.current_mode_id
        if isinstance(update, t.ConfigOptionUpdate):
            self._options(update.config_options)
        if self.replayed is not None:
            self.replayed.append(update)
        else:
            self.view.update(update)

    def _options(self, options: Any) -> None:
        """What the session's config options say of the sandbox (``auto``'s level)."""
        for option in options if isinstance(options, list) else []:
            if getattr(option, "id", None) == "sandbox":
                self.sandbox = str(option.current_value)

    async def _on_permission(self, req: t.RequestPermissionRequest) -> t.RequestPermissionResponse:
        options = {o.kind: o.option_id for o in req.options}
        if not options:
            raise InvalidParams("Invalid params: no permission options")
        kind: t.PermissionOptionKind | None
        policy = self.policy
        if req.tool_call.name == OVERWRITE_QUESTION and policy in ("allow_once", "allow_always"):
            policy = "ask"  # --yes allows tool calls, not overwriting the user's own changes
        if policy == "cannot_ask":  # the call shows why it did not run: said once
            raise CannotAsk(CANNOT_ASK.format(command=self.command))
        if policy == "deny":
            kind = "reject_once"
        elif policy != "ask":
            kind = policy
        else:
            kind = await self._ask(req, options)
            if kind is None:  # Ctrl-C or Ctrl-D: reject, and end the turn
                self.on_ask_cancel()
                return t.RequestPermissionResponse(outcome=t.CancelledRequestPermissionOutcome())
        option = options.get(kind) or _fallback(options, kind)
        return t.RequestPermissionResponse(outcome=t.SelectedPermissionOutcome(option_id=option))

    async def _ask(
        self, req: t.RequestPermissionRequest, options: dict[t.PermissionOptionKind, str]
    ) -> t.PermissionOptionKind | None:
        """One key answers: each option is shown with its own name and its key."""
        names = {o.kind: o.name for o in req.options}
        choices = [(k, names[kind]) for k, kind in PERMISSION_KEYS.items() if kind in options]
        keys = {k for k, _ in choices}
        async with self._asking:
            with self.view.pause():
                self.keyboard.listen()  # before the question shows: no key is lost
                self.view.question(req, choices)
                while True:
                    try:
                        key = await self.keyboard.readkey()
                    except Interrupted:
                        self.view.line_break()
                        self.view.note("rejected; cancelling the turn", "warn")
                        return None
                    except asyncio.CancelledError:  # the agent withdrew it (the turn ended)
                        self.view.line_break()
                        self.view.note("(the question was withdrawn)")
                        raise
                    if key is None:
                        self.eof = True
                        self.view.line_break()
                        self.view.note("rejected; cancelling the turn", "warn")
                        return None
                    kind = PERMISSION_KEYS.get(key) if key in keys else _YES_NO.get(key.lower())
                    if kind is not None:
                        self.view.answered(names.get(kind) or kind)
                        return kind

    # ------------------------------------------------------------------ we ask

    async def initialize(self) -> InitializeResult:
        caps = t.ClientCapabilities(
            fs=t.FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False,
            session=t.ClientSessionCapabilities(notices=t.NoticeCapabilities()),
        )
        result = await self.conn.request(
            "initialize",
            t.InitializeRequest(
                protocol_version=1, client_capabilities=caps, client_info=CLIENT_INFO
            ),
            InitializeResult,
        )
        steering = result.meta.get("steering") if isinstance(result.meta, dict) else None
        self.steering = isinstance(steering, dict) and steering.get("supported") is True
        return result

    async def new_session(self, cwd: str) -> str:
        session = await self.conn.request(
            "session/new", t.NewSessionRequest(cwd=cwd, mcp_servers=[]), t.NewSessionResponse
        )
        self.session_id = session.session_id
        if isinstance(session.modes, t.SessionModeState):
            self.modes = session.modes
        self._options(session.config_options)
        return session.session_id

    async def list_sessions(self, cwd: str | None) -> list[t.SessionInfo]:
        """The agent's stored sessions (of ``cwd``, or all), newest first, every page."""
        found: list[t.SessionInfo] = []
        cursor: str | None = None
        while True:
            page = await self.conn.request(
                "session/list",
                t.ListSessionsRequest(cwd=cwd if cwd is not None else UNSET,
                                      cursor=cursor if cursor is not None else UNSET),
                t.ListSessionsResponse,
            )  # fmt: skip
            found += page.sessions
            if not isinstance(page.next_cursor, str):
                return found
            cursor = page.next_cursor

    async def load_session(self, session_id: str, cwd: str) -> list[t.SessionUpdate]:
        """Open a stored session; what its replay showed, in order (not drawn)."""
        self.replayed = []
        try:
            loaded = await self.conn.request(
                "session/load",
                t.LoadSessionRequest(session_id=session_id, cwd=cwd, mcp_servers=[]),
                t.LoadSessionResponse,
            )
            await asyncio.sleep(0)  # the replay's last updates, read before the response
            replayed = self.replayed
        finally:
            self.replayed = None
        self.session_id = session_id
        if isinstance(loaded.modes, t.SessionModeState):
            self.modes = loaded.modes
        return replayed

    async def prompt(self, session_id: str, text: str) -> t.PromptResponse:
        self.view.begin_turn()
        try:
            result = await self.conn.request(
                "session/prompt",
                t.PromptRequest(session_id=session_id, prompt=[t.TextContent(text=text)]),
                t.PromptResponse,
            )
        except BaseException:
            self.view.close()
            raise
        self.view.finish(result)
        return result

    async def steer(self, session_id: str, text: str) -> str:
        """Send ``text`` into the session's running turn; the outcome (``injected``;
        ``promptRequired`` when no turn runs: nothing is started; ``failed``)."""
        request = steer_wire.SteeringRequest(
            session_id=session_id, prompt=[t.TextContent(text=text)],
            meta={"steering": {"idleBehavior": steer_wire.PROMPT_REQUIRED}},
        )  # fmt: skip
        result = await self.conn.request(steer_wire.METHOD, request, steer_wire.SteeringResponse)
        return result.outcome

    async def cancel(self, session_id: str) -> None:
        await self.conn.notify("session/cancel", t.CancelNotification(session_id=session_id))

    def cancel_soon(self, session_id: str) -> None:
        """:meth:`cancel` from a signal handler."""
        task = asyncio.create_task(self.cancel(session_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def delete(self, session_id: str) -> None:
        """Forget the session (``run`` without ``--save``); an agent that cannot is let be."""
        with contextlib.suppress(AcpError, Exception):
            await self.conn.request(
                "session/delete", t.DeleteSessionRequest(session_id=session_id), dict
            )

    async def close(self, *, grace: float = 5.0) -> None:
        """End the agent's input, wait for it to exit (killed after ``grace`` seconds) and
        for its output to end."""
        await self._writer.aclose()
        if self.proc is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        await self._serving
        if self._stderr_task is not None:
            await self._stderr_task


def _fallback(options: dict[t.PermissionOptionKind, str], kind: str) -> str:
    """The nearest option offered: "always" falls back to "once", and so on; a "no" is
    never turned into a "yes"."""
    order: dict[str, tuple[t.PermissionOptionKind, ...]] = {
        "allow_always": ("allow_once",),
        "allow_once": ("allow_always",),
        "reject_always": ("reject_once",),
        "reject_once": ("reject_always",),
    }
    for alt in order.get(kind, ()):
        if alt in options:
            return options[alt]
    if kind.startswith("reject"):
        return kind  # not offered: the agent takes it as a "no" (it never runs the call)
    return next(iter(options.values()))
