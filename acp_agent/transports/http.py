"""The Streamable HTTP profile of ``/acp``: ``POST`` a message, ``GET`` an SSE stream,
``DELETE`` the connection (see the package's docstring for the wire, ``streams.py`` for
where the agent's messages go).

Every refusal is an HTTP status with one line of plain text saying what to fix, and the
server goes on: 400 (not a JSON-RPC object; a missing, unknown-kind or mismatched
header), 404/410 (an unknown or ended connection), 406, 409 (a stream that already has
a reader; a session another connection holds), 413, 415, 429 (too many session streams),
501 (a batch, with a JSON-RPC error as the SDK's server answers it), 503 (no room, or
draining).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .. import log
from ..rpc.envelope import request_key, valid_id
from .asgi import JSON, Headers, Receive, Scope, Send, read_body, respond
from .holds import held_elsewhere
from .hub import Full, Hub
from .lines import SlowReader
from .peer import LOOKS, Peer
from .streams import KEEPALIVE, Mailbox, Router, _Params

SESSION_METHODS = frozenset((
    "session/cancel", "session/close", "session/delete", "session/fork", "session/load",
    "session/prompt", "session/resume", "session/set_config_option", "session/set_mode",
    "session/set_model",
))  # fmt: skip
"""Methods whose POST carries ``Acp-Session-Id`` (the SDK's list, ``transports/protocol``)."""
MAX_ID = 1024
BATCH = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
    b'"message":"Invalid request: JSON-RPC batches are not supported; send one message'
    b' per POST"}}'
)


class Inbound(msgspec.Struct):
    """What the transport reads of a client's message (the agent reads the rest)."""

    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


_inbound = msgspec.json.Decoder(Inbound)
_params = msgspec.json.Decoder(_Params)


def _session_of(message: Inbound) -> str | None:
    if isinstance(message.params, UnsetType) or not bytes(message.params).startswith(b"{"):
        return None
    try:
        sid = _params.decode(message.params).sessionId
    except msgspec.ValidationError:
        return None
    return sid if isinstance(sid, str) else None


async def handle(hub: Hub, scope: Scope, receive: Receive, send: Send, h: dict[str, str],
                 extra: Headers) -> None:  # fmt: skip
    method = scope["method"]
    if method == "POST":
        await post(hub, receive, send, h, list(extra))
    elif method == "GET":
        await get(hub, receive, send, h, list(extra))
    elif method == "DELETE":
        await delete(hub, send, h, list(extra))
    else:
        await respond(send, 405, "Method Not Allowed: /acp takes POST, GET and DELETE\n",
                      extra=[(b"allow", b"GET, POST, DELETE"), *extra])  # fmt: skip


def _peer(hub: Hub, connection_id: str) -> Peer | tuple[int, str]:
    peer = hub.peers.get(connection_id)
    if peer is not None and isinstance(peer.sink, Router):
        return peer
    reason = hub.gone.get(connection_id)
    if reason is not None:
        return 410, f"Gone: this connection has ended ({reason}); initialize a new one\n"
    if peer is not None:
        return 400, "Bad Request: this Acp-Connection-Id is a WebSocket connection's\n"
    return 404, "Not Found: unknown Acp-Connection-Id; initialize a new connection\n"


async def post(hub: Hub, receive: Receive, send: Send, h: dict[str, str],
               extra: list[tuple[bytes, bytes]]) -> None:  # fmt: skip
    limit = hub.limits.max_message_bytes
    if h.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        await respond(send, 415, "Unsupported Media Type: POST one JSON-RPC message as"
                      " application/json\n", extra=extra)  # fmt: skip
        return
    declared = h.get("content-length", "")
    too_big = declared.isdigit() and int(declared) > 4 * limit
    body = None if too_big else await read_body(receive, limit)
    if body is None:
        await respond(send, 413, f"Payload Too Large: a message may be at most {limit} bytes\n",
                      extra=[(b"connection", b"close"), *extra])  # fmt: skip
        return
    try:
        message = _inbound.decode(body)
    except msgspec.ValidationError:
        if body.lstrip().startswith(b"["):
            await respond(send, 501, BATCH, JSON, extra)
        else:
            await respond(send, 400, "Bad Request: a JSON-RPC message is a JSON object\n",
                          extra=extra)  # fmt: skip
        return
    except msgspec.DecodeError as exc:
        await respond(send, 400, f"Bad Request: invalid JSON ({exc})\n", extra=extra)
        return
    connection_id = h.get("acp-connection-id")
    if message.method == "initialize" and message.id is not UNSET:
        if connection_id:
            await respond(send, 400, "Bad Request: initialize opens a connection; send it"
                          " without Acp-Connection-Id\n", extra=extra)  # fmt: skip
        else:
            await initialize(hub, body, message, send, extra)
        return
    if not connection_id:
        await respond(send, 400, "Bad Request: missing Acp-Connection-Id (initialize first)\n",
                      extra=extra)  # fmt: skip
        return
    found = _peer(hub, connection_id)
    if not isinstance(found, Peer):
        await respond(send, *found, extra=extra)
        return
    problem = _route(found, message, h.get("acp-session-id"))
    if problem is not None:
        await respond(send, *problem, extra=extra)
        return
    router = found.sink
    assert isinstance(router, Router)
    router.touch()
    found.feed(body)
    await respond(send, 202, extra=extra)


def _route(peer: Peer, message: Inbound, header: str | None) -> tuple[int, str] | None:
    """Check a message's session headers against its body; note where its response
    goes. A problem is ``(status, text)``."""
    router = peer.sink
    assert isinstance(router, Router)
    if header is not None and len(header) > MAX_ID:
        return 400, f"Bad Request: Acp-Session-Id is longer than {MAX_ID} characters\n"
    if isinstance(message.method, str):
        params_sid = _session_of(message)
        if (message.method in SESSION_METHODS or params_sid) and not header:
            return 400, f"Bad Request: {message.method} needs the Acp-Session-Id header\n"
        if header and params_sid and header != params_sid:
            return 400, "Bad Request: Acp-Session-Id is not the sessionId of the message\n"
        sid = header or params_sid
        holder = peer.holds.holder(sid) if sid else None
        if (sid and holder is not None and holder != peer.id and message.method not in LOOKS
                and not peer.holds.is_leaving(holder)):
            refusal = held_elsewhere(sid).message.removeprefix("Invalid request: ")
            return 409, f"Conflict: {refusal}\n"
        if message.id is not UNSET and valid_id(message.id):
            if message.method == "session/load":  # on the connection's, after the replay
                router.expect(message.id, None, after=sid)
            else:
                router.expect(message.id, sid)
        return None
    if message.id is not UNSET and valid_id(message.id):  # a response to our request
        asked = router.asked.pop(request_key(message.id), None)
        if asked is not None and header != asked:
            return 400, "Bad Request: a response carries the Acp-Session-Id of the session" \
                " its request came on\n"
    return None


async def initialize(hub: Hub, body: bytes, message: Inbound, send: Send,
                     extra: list[tuple[bytes, bytes]]) -> None:  # fmt: skip
    limits = hub.limits
    router = Router(limits.high_water, limits.stall_timeout, lambda exc: None,
                    limits.max_session_streams)  # fmt: skip
    try:
        peer = hub.open(router)
    except Full:
        text = ("Service Unavailable: the server is shutting down\n" if hub.draining else
                f"Service Unavailable: this server takes at most {limits.max_connections}"
                " connections; try again later\n")  # fmt: skip
        await respond(send, 503, text, extra=[(b"retry-after", b"5"), *extra])
        return

    def stalled(exc: SlowReader) -> None:
        hub.close(peer, f"slow reader: {exc}")

    router.on_stall = stalled
    answer = router.initialize(message.id)
    peer.feed(body)
    try:
        line = await asyncio.wait_for(answer, 60)
    except TimeoutError:
        hub.close(peer, "initialize was not answered")
        await respond(send, 503, "Service Unavailable: initialize was not answered\n",
                      extra=extra)  # fmt: skip
        return
    if b'"error"' in line and _failed(line):
        hub.close(peer, "initialize failed")
        await respond(send, 400, line, JSON, extra)
        return
    router.touch()
    await respond(send, 200, line, JSON, [(b"acp-connection-id", peer.id.encode()), *extra])


class _Outcome(msgspec.Struct):
    error: Any = UNSET


def _failed(line: bytes) -> bool:
    return msgspec.json.decode(line, type=_Outcome).error is not UNSET


async def get(hub: Hub, receive: Receive, send: Send, h: dict[str, str],
              extra: list[tuple[bytes, bytes]]) -> None:  # fmt: skip
    if "text/event-stream" not in h.get("accept", "").lower():
        await respond(send, 406, "Not Acceptable: GET /acp opens an event stream (Accept:"
                      " text/event-stream) or a WebSocket (Upgrade: websocket)\n",
                      extra=extra)  # fmt: skip
        return
    connection_id = h.get("acp-connection-id")
    if not connection_id:
        await respond(send, 400, "Bad Request: missing Acp-Connection-Id (initialize first)\n",
                      extra=extra)  # fmt: skip
        return
    found = _peer(hub, connection_id)
    if not isinstance(found, Peer):
        await respond(send, *found, extra=extra)
        return
    router = found.sink
    assert isinstance(router, Router)
    session_id = h.get("acp-session-id")
    if session_id is not None and len(session_id) > MAX_ID:
        await respond(send, 400, f"Bad Request: Acp-Session-Id is longer than {MAX_ID}"
                      " characters\n", extra=extra)  # fmt: skip
        return
    box = router.mailbox(session_id)
    if box is None:
        await respond(send, 429, f"Too Many Requests: a connection has at most"
                      f" {router.max_streams} session streams\n", extra=extra)  # fmt: skip
        return
    reader = object()
    if not box.attach(reader):
        await respond(send, 409, "Conflict: this stream already has a reader\n", extra=extra)
        return
    try:
        await _stream(router, box, receive, send, hub.limits.keepalive, extra)
    finally:
        box.detach(reader)
        box.sending = False
        router.sent(box, left=True)  # nothing waits on a stream nobody reads
        router.touch()


async def _stream(router: Router, box: Mailbox, receive: Receive, send: Send,
                  keepalive: float, extra: list[tuple[bytes, bytes]]) -> None:  # fmt: skip
    """Serve ``box`` as an SSE response until it ends or the client goes."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        box.wake.set()

    watcher = asyncio.ensure_future(watch())
    head = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"), *extra]  # fmt: skip
    try:
        await send({"type": "http.response.start", "status": 200, "headers": head})
        while not gone.is_set():
            if box.lines:
                box.sending = True
                await send({"type": "http.response.body", "body": router.take(box),
                            "more_body": True})  # fmt: skip
                box.sending = False
                router.sent(box)
                continue
            if box.ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            box.wake.clear()
            try:
                await asyncio.wait_for(box.wake.wait(), keepalive)
            except TimeoutError:
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
    except Exception as exc:  # the client went away mid-write
        log.debug("event stream ended", error=repr(exc))
    finally:
        watcher.cancel()


async def delete(hub: Hub, send: Send, h: dict[str, str],
                 extra: list[tuple[bytes, bytes]]) -> None:  # fmt: skip
    connection_id = h.get("acp-connection-id")
    if not connection_id:
        await respond(send, 400, "Bad Request: missing Acp-Connection-Id\n", extra=extra)
        return
    found = _peer(hub, connection_id)
    if not isinstance(found, Peer):
        await respond(send, *found, extra=extra)
        return
    hub.close(found, "closed by the client")
    await respond(send, 202, extra=extra)
