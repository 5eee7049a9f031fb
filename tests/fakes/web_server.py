"""A small HTTP/1.1 server on 127.0.0.1 for web_fetch: each path answers with a status,
headers and a body (``routes``); every request is recorded with its ``Host`` header.
As most real servers do, it gzips a text body when the request accepts gzip (``gzip``:
off for paths in ``plain``); ``trickle`` paths send their body a byte every 10 ms, without
end (a server that never finishes a page)."""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass, field


@dataclass
class WebRequest:
    path: str
    host: str
    accept_encoding: str = ""


@dataclass
class WebServer:
    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    requests: list[WebRequest] = field(default_factory=list)
    plain: set[str] = field(default_factory=set)
    trickle: set[str] = field(default_factory=set)
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
            fields: dict[str, str] = {}
            while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = raw.decode("latin-1").partition(":")
                fields[name.strip().lower()] = value.strip()
            route = path.split("?")[0]
            accepts = fields.get("accept-encoding", "")
            self.requests.append(WebRequest(path, fields.get("host", ""), accepts))
            status, headers, body = self.routes.get(route, (404, {}, b"not found"))
            if route in self.trickle:
                await self._trickle(writer, status, headers)
                return
            compress = ("gzip" in accepts and route not in self.plain and body
                        and headers.get("content-type", "").startswith("text/"))  # fmt: skip
            if compress:
                body, headers = gzip.compress(body), {**headers, "content-encoding": "gzip"}
            head = f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\nconnection: close\r\n"
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        except (ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _trickle(writer: asyncio.StreamWriter, status: int, headers: dict[str, str]) -> None:
        head = f"HTTP/1.1 {status} X\r\ntransfer-encoding: chunked\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(head.encode())
        while True:  # until the client hangs up
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
