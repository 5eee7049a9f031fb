"""The WebSocket profile of ``/acp``: ``GET`` with ``Upgrade: websocket``, then one
JSON-RPC message per text frame each way, as on stdio one per line.

The connection exists from the upgrade (``101`` carries ``Acp-Connection-Id``); the client
still sends ``initialize`` first (before it, the agent refuses requests with -32600, as on
stdio). Binary frames are ignored (RFD). A frame over ``--max-message-bytes`` is closed
with 1009 by the server (hypercorn's ``websocket_max_message_size``); a client that reads
nothing for ``--stall-timeout`` with ``high_water`` bytes waiting, with 1008; draining,
with 1001. When the socket goes, the connection ends as stdio does at end of input.
"""

from __future__ import annotations

import asyncio
import contextlib

from .. import log
from .asgi import Headers, Receive, Scope, Send
from .hub import Full, Hub
from .lines import FrameSink, SlowReader

GOING_AWAY = 1001
POLICY = 1008


async def reject(send: Send, status: int, text: str, extra: Headers = ()) -> None:
    """Refuse an upgrade with an HTTP response (ASGI's ``websocket.http.response``)."""
    body = text.encode()
    head = [(b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()), *extra]  # fmt: skip
    await send({"type": "websocket.http.response.start", "status": status, "headers": head})
    await send({"type": "websocket.http.response.body", "body": body})


async def handle(hub: Hub, scope: Scope, receive: Receive, send: Send) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    limits = hub.limits

    async def send_text(text: str) -> None:
        await send({"type": "websocket.send", "text": text})

    codes: dict[str, int] = {}

    def stalled(exc: SlowReader) -> None:
        codes["code"] = POLICY
        hub.close(peer, f"slow reader: {exc}")

    sink = FrameSink(send_text, limits.high_water, limits.stall_timeout, stalled)
    try:
        peer = hub.open(sink)
    except Full:
        text = ("Service Unavailable: the server is shutting down\n" if hub.draining else
                f"Service Unavailable: this server takes at most {limits.max_connections}"
                " connections; try again later\n")  # fmt: skip
        await reject(send, 503, text, [(b"retry-after", b"5")])
        return
    await send({"type": "websocket.accept", "headers": [(b"acp-connection-id", peer.id.encode())]})
    pump = asyncio.ensure_future(sink.pump())

    async def read() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                log.info("binary WebSocket frame ignored", connection_id=peer.id)
                continue
            peer.feed(text.encode())

    reading = asyncio.ensure_future(read())
    ended = asyncio.ensure_future(peer.closed.wait())
    try:
        await asyncio.wait([reading, ended], return_when=asyncio.FIRST_COMPLETED)
        if reading.done():  # the client went away
            await hub.close(peer, "the client disconnected")
        else:  # the server ended it: say why (a client that reads nothing never hears it)
            code = GOING_AWAY if hub.draining else codes.get("code", 1000)
            close = {"type": "websocket.close", "code": code, "reason": (peer.reason or "")[:120]}
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(send(close), 1.0)
    finally:
        reading.cancel()
        ended.cancel()
        pump.cancel()
