"""The little of ASGI the transports need: headers read once, plain responses, a body
read within a limit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = Iterable[tuple[bytes, bytes]]

TEXT = b"text/plain; charset=utf-8"
JSON = b"application/json"


def headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (repeated ones joined with ``, ``)."""
    out: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


async def respond(
    send: Send,
    status: int,
    body: bytes | str = b"",
    content_type: bytes = TEXT,
    extra: Headers = (),
) -> None:
    """A whole response: ``body`` (text, unless ``content_type`` says otherwise)."""
    data = body.encode() if isinstance(body, str) else body
    head = [(b"content-length", str(len(data)).encode()), *extra]
    if data:
        head.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or ``None`` when it is over ``limit`` bytes. An oversized body
    is read on (and dropped) up to four times the limit, so the client, still sending,
    gets the refusal rather than a reset connection; past that the exchange is cut."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= limit:
            parts.append(chunk)
        elif parts:
            parts.clear()
        if not message.get("more_body", False) or size > 4 * limit:
            return b"".join(parts) if size <= limit else None
