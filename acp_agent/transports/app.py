"""The ASGI application of ``acp-agent serve``: ``/acp`` (both profiles) and ``/healthz``.

Before anything reaches a connection:

* ``/healthz`` answers ``200 ok`` (``503 draining`` while shutting down) without
  credentials: it is for container and balancer health checks, and says nothing else;
* a request carrying an ``Origin`` (a browser's) is refused ``403`` unless that origin was
  allowed (``--allow-origin``); allowed ones get CORS headers and their preflight;
* every other request needs ``Authorization: Bearer <token>``, compared in constant time;
  without it, or with another token: ``401`` with no detail (and ``WWW-Authenticate``);
* any other path is ``404``.

Streamable HTTP connections that have no stream open and make no request for
``--idle-timeout`` seconds are ended by a reaper (their client is gone: the SDK keeps its
connection stream open for as long as it uses the connection); a WebSocket connection
ends with its socket.
"""

from __future__ import annotations

import asyncio
import hmac

from .. import log
from . import http, ws
from .asgi import Receive, Scope, Send, headers, respond
from .hub import Hub
from .streams import Router

ALLOW_HEADERS = b"authorization, content-type, acp-connection-id, acp-session-id, " \
    b"acp-protocol-version"


class App:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._reaper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self.http(scope, receive, send)
        elif kind == "websocket":
            await self.websocket(scope, receive, send)
        elif kind == "lifespan":
            await self.lifespan(receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._reaper = asyncio.ensure_future(self.reap())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._reaper is not None:
                    self._reaper.cancel()
                await self.hub.drain()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------ the gate

    def _origin(self, h: dict[str, str]) -> tuple[bool, list[tuple[bytes, bytes]]]:
        """Whether the request may pass its origin check, and the CORS headers it gets."""
        origin = h.get("origin")
        if origin is None:
            return True, []
        allowed = self.hub.settings.allow_origins
        if origin not in allowed and "*" not in allowed:
            return False, []
        return True, [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-credentials", b"true"),
            (b"access-control-expose-headers", b"acp-connection-id"),
            (b"vary", b"origin"),
        ]

    def _authorized(self, h: dict[str, str]) -> bool:
        token = self.hub.settings.token
        if token is None:  # --insecure-no-auth, loopback only
            return True
        scheme, _, given = h.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        )

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/healthz" and method in ("GET", "HEAD"):
            draining = self.hub.draining
            await respond(send, 503 if draining else 200, "draining\n" if draining else "ok\n")
            return
        if path != "/acp":
            await respond(send, 404, "Not Found: the ACP endpoint is /acp\n")
            return
        h = headers(scope)
        allowed, cors = self._origin(h)
        if not allowed:
            log.warning("origin refused", origin=h.get("origin"))
            await respond(send, 403, "Forbidden: this origin is not allowed (--allow-origin)\n")
            return
        if method == "OPTIONS" and cors:
            await respond(send, 204, extra=[*cors,
                (b"access-control-allow-methods", b"GET, POST, DELETE"),
                (b"access-control-allow-headers", ALLOW_HEADERS),
                (b"access-control-max-age", b"600")])  # fmt: skip
            return
        if not self._authorized(h):
            log.warning("unauthorized request", client=_client(scope))
            await respond(send, 401, "Unauthorized\n",
                          extra=[(b"www-authenticate", b"Bearer"), *cors])  # fmt: skip
            return
        await http.handle(self.hub, scope, receive, send, h, cors)

    async def websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != "/acp":
            await ws.reject(send, 404, "Not Found: the ACP endpoint is /acp\n")
            return
        h = headers(scope)
        allowed, _ = self._origin(h)
        if not allowed:
            log.warning("origin refused", origin=h.get("origin"))
            await ws.reject(send, 403, "Forbidden: this origin is not allowed (--allow-origin)\n")
            return
        if not self._authorized(h):
            log.warning("unauthorized request", client=_client(scope))
            await ws.reject(send, 401, "Unauthorized\n", [(b"www-authenticate", b"Bearer")])
            return
        await ws.handle(self.hub, scope, receive, send)

    # ------------------------------------------------------------------ idle connections

    async def reap(self) -> None:
        """End Streamable HTTP connections nobody uses (see the module's docstring)."""
        idle = self.hub.limits.idle_timeout
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(max(idle / 4, 0.05))
            now = loop.time()
            for peer in list(self.hub.peers.values()):
                sink = peer.sink
                if isinstance(sink, Router) and not sink.reading() and now - sink.touched > idle:
                    self.hub.close(peer, f"idle: no stream open and no request for {idle:g} s")


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "?"
