"""A scripted model server on 127.0.0.1 speaking the OpenAI and Anthropic streaming formats.

A real HTTP/1.1 server (asyncio streams, ephemeral port, chunked SSE bodies) so the real
SDKs run their whole stack against it. ``POST .../chat/completions`` answers in the OpenAI
Chat Completions SSE format, ``POST .../messages`` in the Anthropic Messages format
(the steps and their rendering live in :mod:`tests.fakes.llm_wire`).

Tests enqueue one response per expected request and read back what the client sent::

    async with FakeLLMServer() as server:
        server.enqueue(Reply([Text("Hel"), Text("lo"), Usage(10, 2), Finish("stop")]))
        provider = OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)
        ...
        server.requests[0].body["messages"]

When the queue is empty the server answers with ``default`` (an HTTP 500 unless set).
``python -m tests.fakes.llm_server --chunks 200`` serves :class:`Burst` replies forever and
prints its port on stdout (for benchmarks that spawn the agent against it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeAlias

from ..limits import WAIT
from .llm_wire import (
    Finish,
    Raw,
    Redacted,
    Refusal,
    Step,
    Text,
    Thinking,
    ToolCall,
    Usage,
    anthropic_events,
    openai_events,
)

__all__ = [  # the steps are re-exported: tests import everything from here
    "Burst",
    "FakeLLMServer",
    "Finish",
    "Hang",
    "HttpError",
    "Raw",
    "RecordedRequest",
    "Redacted",
    "Refusal",
    "Reply",
    "Text",
    "Thinking",
    "ToolCall",
    "Usage",
]

# --------------------------------------------------------------------------- responses


@dataclass(frozen=True)
class Reply:
    """A streamed reply. ``disconnect_after``/``hang_after`` count SSE events written."""

    steps: list[Step]
    disconnect_after: int | None = None  # then drop the connection (no terminating chunk)
    hang_after: int | None = None  # then stop sending, keeping the connection open
    done: bool = True  # OpenAI: end with ``data: [DONE]``
    delay: float = 0.0  # seconds between events


@dataclass(frozen=True)
class HttpError:
    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer."""


@dataclass(frozen=True)
class Burst:
    """Fast path: ``n`` text chunks of ``text``, pre-rendered and written at once."""

    n: int
    text: str = "x"


Response: TypeAlias = Reply | HttpError | Hang | Burst


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # decoded JSON (or the raw bytes if not JSON)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the client went away before the response was complete."""


# --------------------------------------------------------------------------- the server

_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # e.g. Anthropic's 529
        return "Error"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class FakeLLMServer:
    def __init__(
        self, *, default: Response | None = None, port: int = 0, record: bool = True
    ) -> None:
        self.default = default or HttpError(500, {"error": {"message": "no scripted response"}})
        self.requests: list[RecordedRequest] = []
        self.record = record  # keep every request in ``requests`` (off for long benchmarks)
        self.port = port
        self._queue: deque[Response] = deque()
        self._server: asyncio.Server | None = None
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._burst_cache: dict[tuple[str, int, str, str], bytes] = {}
        self._arrived = asyncio.Event()

    @property
    def url(self) -> str:
        """Base URL for Anthropic clients (they add ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """Base URL for OpenAI clients (they add ``/chat/completions``)."""
        return f"{self.url}/v1"

    def enqueue(self, *responses: Response) -> None:
        self._queue.extend(responses)

    async def wait_for_requests(self, n: int = 1, timeout: float = WAIT) -> None:
        """Wait until ``n`` requests have arrived (recorded in ``requests``)."""

        async def arrived() -> None:
            while len(self.requests) < n:
                self._arrived.clear()
                await self._arrived.wait()

        await asyncio.wait_for(arrived(), timeout)

    async def start(self) -> FakeLLMServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._conns.values()):
            writer.transport.abort()  # the handler then sees EOF and ends by itself
        await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> FakeLLMServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        try:
            while (req := await _read_request(reader)) is not None:
                if self.record:
                    self.requests.append(req)
                    self._arrived.set()
                resp = self._queue.popleft() if self._queue else self.default
                if not await self._respond(req, resp, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.pop(task, None)
            writer.transport.abort()

    async def _respond(
        self,
        req: RecordedRequest,
        resp: Response,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; False when the connection must not be reused."""
        path = req.path.split("?", 1)[0]
        vendor = "openai" if path.endswith("/chat/completions") else "anthropic"
        if not path.endswith(("/chat/completions", "/messages")):
            resp = HttpError(404, {"error": {"message": f"no route {path}"}})
        model = str(req.body.get("model", "")) if isinstance(req.body, dict) else ""
        if isinstance(resp, HttpError):
            body = json.dumps(resp.body or {}).encode()
            head = f"HTTP/1.1 {resp.status} {_phrase(resp.status)}\r\n"
            headers = {
                "content-type": "application/json",
                "content-length": str(len(body)),
                **resp.headers,
            }
            head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
            return True
        if isinstance(resp, Hang):
            await _wait_eof(reader, req)
            return False
        if isinstance(resp, Burst):
            writer.write(self._burst(vendor, model, resp))
            await writer.drain()
            return True
        events = (
            openai_events(resp.steps, model, resp.done)
            if vendor == "openai"
            else anthropic_events(resp.steps, model)
        )
        writer.write(_SSE_HEAD)
        for i, event in enumerate([*events, None]):
            if i == resp.disconnect_after:
                await writer.drain()
                return False  # _serve aborts the socket: no terminating chunk
            if i == resp.hang_after:
                await writer.drain()
                await _wait_eof(reader, req)
                return False
            if event is None:
                break
            writer.write(_chunk(event))
            try:
                await writer.drain()
            except ConnectionError:
                req.disconnected.set()
                return False
            if resp.delay:
                await asyncio.sleep(resp.delay)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    def _burst(self, vendor: str, model: str, burst: Burst) -> bytes:
        key = (vendor, burst.n, burst.text, model)
        if key not in self._burst_cache:
            steps: list[Step] = [Text(burst.text)] * burst.n
            steps += [Finish("stop"), Usage(burst.n, burst.n)]
            events = (
                openai_events(steps, model)
                if vendor == "openai"
                else anthropic_events(steps, model)
            )
            self._burst_cache[key] = _SSE_HEAD + _chunk(b"".join(events)) + b"0\r\n\r\n"
        return self._burst_cache[key]


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        data = b""
        while size := int((await reader.readline()).split(b";")[0], 16):
            data += await reader.readexactly(size + 2)
            data = data[:-2]
        await reader.readline()
    else:
        data = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        body: Any = json.loads(data) if data else None
    except ValueError:
        body = data
    return RecordedRequest(method, path, headers, body)


async def _wait_eof(reader: asyncio.StreamReader, req: RecordedRequest) -> None:
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass
    req.disconnected.set()


# --------------------------------------------------------------------------- CLI


async def _main(port: int, chunks: int, text: str) -> None:
    server = FakeLLMServer(default=Burst(chunks, text), port=port, record=False)
    await server.start()
    print(server.port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Scripted OpenAI/Anthropic SSE server.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=50, help="text chunks per reply")
    parser.add_argument("--text", default="x ", help="text of each chunk")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port, args.chunks, args.text))
