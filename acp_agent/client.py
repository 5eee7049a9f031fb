"""The editor, as the agent sees it: typed calls to the client's methods.

:class:`Client` is the seam the turn engine and tools talk through (tests pass a
recording fake); :class:`ClientProxy` implements it over a :class:`Connection` and
refuses to call any method whose capability the client did not advertise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .errors import MethodNotFound
from .protocol import types as t
from .rpc.connection import Connection


class Client(Protocol):
    @property
    def capabilities(self) -> t.ClientCapabilities: ...

    def allows(self, method: str) -> bool:
        """Whether the client advertised the capability that ``method`` needs."""
        ...

    async def session_update(self, session_id: str, update: t.SessionUpdate) -> None: ...

    async def request_permission(
        self,
        session_id: str,
        tool_call: t.ToolCallUpdate,
        options: Sequence[t.PermissionOption],
    ) -> t.RequestPermissionOutcome: ...

    async def call(self, method: str, params: Any, result_type: type[Any]) -> Any:
        """Any other client method (fs/*, terminal/*, elicitation/*), gated by capability."""
        ...


_CAPABILITY_GATES = {
    "fs/read_text_file": lambda c: bool(c.fs and c.fs.read_text_file),
    "fs/write_text_file": lambda c: bool(c.fs and c.fs.write_text_file),
    "terminal/create": lambda c: bool(c.terminal),
    "terminal/output": lambda c: bool(c.terminal),
    "terminal/wait_for_exit": lambda c: bool(c.terminal),
    "terminal/kill": lambda c: bool(c.terminal),
    "terminal/release": lambda c: bool(c.terminal),
    "elicitation/create": lambda c: bool(elicitation_modes(c)),  # and the request's mode
    "elicitation/complete": lambda c: "url" in elicitation_modes(c),
}


def elicitation_modes(caps: t.ClientCapabilities) -> frozenset[str]:
    """The elicitation modes the client advertised: ``form`` and ``url`` each only when
    present and non-null (``elicitation: {}`` advertises none)."""
    e = caps.elicitation
    if not isinstance(e, t.ElicitationCapabilities):
        return frozenset()
    modes = {"form": isinstance(e.form, t.ElicitationFormCapabilities),
             "url": isinstance(e.url, t.ElicitationUrlCapabilities)}  # fmt: skip
    return frozenset(m for m, on in modes.items() if on)


def elicitation_mode(params: Any) -> str | None:
    """The mode of an ``elicitation/create`` request."""
    if isinstance(params, t.ElicitationFormMode):
        return "form"
    if isinstance(params, t.ElicitationUrlMode):
        return "url"
    return None


class ClientProxy:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection
        self.capabilities: t.ClientCapabilities = t.ClientCapabilities()

    def allows(self, method: str) -> bool:
        gate = _CAPABILITY_GATES.get(method)
        return gate is None or gate(self.capabilities)

    async def session_update(self, session_id: str, update: t.SessionUpdate) -> None:
        await self._conn.notify(
            "session/update", t.SessionNotification(session_id=session_id, update=update)
        )

    async def request_permission(
        self,
        session_id: str,
        tool_call: t.ToolCallUpdate,
        options: Sequence[t.PermissionOption],
    ) -> t.RequestPermissionOutcome:
        response = await self._conn.request(
            "session/request_permission",
            t.RequestPermissionRequest(
                session_id=session_id, tool_call=tool_call, options=list(options)
            ),
            t.RequestPermissionResponse,
            cancel_remote=False,  # the client answers `cancelled` itself after session/cancel
        )
        return response.outcome

    async def notify(self, method: str, params: Any) -> None:
        """A notification outside any session (``auth/status_update``)."""
        await self._conn.notify(method, params)

    async def call(self, method: str, params: Any, result_type: type[Any]) -> Any:
        if not self.allows(method):
            raise MethodNotFound(f"the client did not advertise {method}")
        if method == "elicitation/create":
            mode = elicitation_mode(params)
            if mode not in elicitation_modes(self.capabilities):
                raise MethodNotFound(f"the client did not advertise elicitation {mode} mode")
        return await self._conn.request(method, params, result_type)
