"""A small HTTP/1.1 server on 127.0.0.1 for web_fetch: each path answers with a status,
headers and a body (``routes``); every request is recorded with its ``Host`` header."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass
class WebRequest:
    path: str
    host: str


@dataclass
class WebServer:
    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    requests: list[WebRequest] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> WebServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            _, path, _ = line.decode("latin-1").split(" ", 2)
            host = ""
            while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = raw.decode("latin-1").partition(":")
                if name.strip().lower() == "host":
                    host = value.strip()
            self.requests.append(WebRequest(path, host))
            status, headers, body = self.routes.get(path.split("?")[0], (404, {}, b"not found"))
            head = f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\nconnection: close\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        except (ConnectionError, ValueError):
            pass
        finally:
            writer.close()
