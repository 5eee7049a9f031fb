"""A scripted model server on 127.0.0.1 speaking the OpenAI and Anthropic streaming formats.

A real HTTP/1.1 server (asyncio streams, ephemeral port, chunked SSE bodies) so the real
SDKs run their whole stack against it. ``POST .../chat/completions`` answers in the OpenAI
Chat Completions SSE format, ``POST .../responses`` in the OpenAI Responses format (after
the checks of :mod:`tests.fakes.llm_responses`: a request the real API refuses is refused
with its error, and the scripted reply stays queued), ``POST .../messages`` in the Anthropic
Messages format (the steps and their rendering live in :mod:`tests.fakes.llm_wire`).

What the server says about models and keys (``GET .../models``, ``.../models/<id>``,
``.../key``, ``POST /api/show``; see :mod:`tests.fakes.llm_models`) goes to
``model_requests``, never takes a scripted reply, and is not in ``requests``. Each
request records the ``connection`` it came over.

Tests enqueue one response per expected request and read back what the client sent::

    async with FakeLLMServer() as server:
        server.enqueue(Reply([Text("Hel"), Text("lo"), Usage(10, 2), Finish("stop")]))
        provider = OpenAIProvider("gpt-4.1", api_key="k", base_url=server.openai_url)
        ...
        server.requests[0].body["messages"]

When the queue is empty the server answers with ``default`` (an HTTP 500 unless set).

Faults, as the real services produce them: :func:`openai_error`/:func:`anthropic_error`
(the vendors' error bodies and headers), :class:`Hang` (no response headers, ever),
``Reply(hang_after=n)`` (silence after ``n`` events), ``Reply(hold=event, hold_at=text)``
(a pause after the event carrying ``text``, until the test sets ``event``),
``Reply(keepalive_after=n)``
(only keep-alives after ``n`` events: SSE comments for OpenAI, ``ping`` events for
Anthropic), ``Reply(disconnect_after=n)``, :class:`Malformed` events. Stalls are endless:
they end when the client goes away. A server built on a bound but not yet listening
socket (``FakeLLMServer(sock=...)``) refuses connections until :meth:`start`;
``FakeLLMServer(tls=context)`` serves HTTPS with that server context.
Billing, as the vendors bill (:mod:`tests.fakes.llm_billing`): ``FakeLLMServer(billing=True)``
counts every request's prompt tokens, prompt caching included (Anthropic's ``cache_control``
breakpoints, OpenAI's automatic prefix caching per ``prompt_cache_key``), reports them as
the reply's usage in place of a scripted :class:`Usage` (whose output count is kept), and
keeps each request's :class:`Bill` in ``server.billing.bills``. Anthropic requests with
breakpoints the API refuses are answered with its 400, billing or not.
``python -m tests.fakes.llm_server --chunks 200 [--per-event]`` serves :class:`Burst` replies
forever and prints its port on stdout (for benchmarks that spawn the agent against it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import socket
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeAlias

from ..limits import WAIT
from .api_rules import violation
from .llm_billing import Bill, Billing, cache_control_error
from .llm_models import is_model_facts, model_facts
from .llm_responses import ResponsesState, check
from .llm_wire import (
    KEEPALIVE,
    Finish,
    Malformed,
    Raw,
    Reasoning,
    Redacted,
    Refusal,
    Step,
    Text,
    Thinking,
    ToolCall,
    Usage,
    anthropic_events,
    openai_events,
    responses_events,
)

__all__ = [  # the steps are re-exported: tests import everything from here
    "Bill",
    "Billing",
    "Burst",
    "FakeLLMServer",
    "Finish",
    "Frames",
    "Hang",
    "HttpError",
    "Malformed",
    "Raw",
    "Reasoning",
    "RecordedRequest",
    "Redacted",
    "Refusal",
    "Reply",
    "Text",
    "Thinking",
    "ToolCall",
    "Usage",
    "anthropic_error",
    "openai_error",
]

# --------------------------------------------------------------------------- responses


@dataclass(frozen=True)
class Reply:
    """A streamed reply. ``disconnect_after``/``hang_after`` count SSE events written."""

    steps: list[Step]
    disconnect_after: int | None = None  # then drop the connection (no terminating chunk)
    hang_after: int | None = None  # then stop sending, keeping the connection open
    keepalive_after: int | None = None  # then only keep-alives, until the client goes
    keepalive_every: float = 0.05
    done: bool = True  # OpenAI: end with ``data: [DONE]``
    delay: float = 0.0  # seconds between events
    hold: asyncio.Event | None = None  # once the event carrying ``hold_at`` is out, wait
    hold_at: str = ""  # for it to be set (a stream in progress, as long as a test needs)


@dataclass(frozen=True)
class HttpError:
    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


def openai_error(
    status: int, message: str, type: str, code: str | None = None, **headers: str
) -> HttpError:
    """An error as api.openai.com answers it (``retry_after="2"`` -> ``retry-after: 2``)."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    return HttpError(status, body, {"x-request-id": "req_fake", **named})


def anthropic_error(status: int, type: str, message: str, **headers: str) -> HttpError:
    """An error as api.anthropic.com answers it (529 ``overloaded_error`` included)."""
    body = {"type": "error", "error": {"type": type, "message": message}}
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    return HttpError(status, body, {"request-id": "req_fake", **named})


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer."""


@dataclass(frozen=True)
class Burst:
    """Fast path: ``n`` text chunks of ``text``, pre-rendered and written at once: the whole
    reply in one HTTP chunk frame, or with ``per_event`` one frame per SSE event (as the
    vendors send)."""

    n: int
    text: str = "x"
    per_event: bool = False


@dataclass(frozen=True)
class Frames:
    """A body written as is, one HTTP chunk frame per item (for SSE edge cases)."""

    frames: list[bytes]
    content_type: str = "text/event-stream"


@dataclass(frozen=True)
class _Json:
    """A 200 JSON answer (model listings)."""

    body: Any


Response: TypeAlias = Reply | HttpError | Hang | Burst | Frames | _Json


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # decoded JSON (or the raw bytes if not JSON)
    connection: int = 0
    """Which connection it came over (numbered from 1 in the order they were accepted)."""
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
        self,
        *,
        default: Response | None = None,
        port: int = 0,
        record: bool = True,
        sock: socket.socket | None = None,
        billing: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.default = default or HttpError(500, {"error": {"message": "no scripted response"}})
        self.billing = Billing() if billing else None
        self.requests: list[RecordedRequest] = []
        self.model_requests: list[RecordedRequest] = []  # GET /models, POST /api/show
        self.models: list[dict[str, Any]] | HttpError | Hang | None = None
        self.ollama: dict[str, Any] = {}  # model name -> /api/show answer (or Hang, HttpError)
        self.responses = ResponsesState()
        self.record = record  # keep every request in ``requests`` (off for long benchmarks)
        self.port = sock.getsockname()[1] if sock is not None else port
        self._sock = sock
        self._tls = tls  # HTTPS with this server context
        self._queue: deque[Response] = deque()
        self._server: asyncio.Server | None = None
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._burst_cache: dict[tuple[str, int, str, str, bool], bytes] = {}
        self.window: int | None = None
        """The model's context window in tokens (``api_rules.count_tokens``): a longer
        request gets the vendor's context-length error. ``None``: unlimited."""
        self.lenient = False
        """Skip ``api_rules`` (a test that sends what the APIs reject on purpose)."""
        self.responder: Callable[[RecordedRequest], Response | None] | None = None
        """Answers a request by its content before the queue is asked (``None``: the
        queue answers), e.g. every summary request of a long session."""
        self._arrived = asyncio.Event()
        self.connections = 0
        """Connections accepted so far."""

    @property
    def url(self) -> str:
        """Base URL for Anthropic clients (they add ``/v1/messages``)."""
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """Base URL for OpenAI clients (they add ``/chat/completions``)."""
        return f"{self.url}/v1"

    def enqueue(self, *responses: Response) -> None:
        self._queue.extend(responses)

    async def wait_for_requests(
        self, n: int = 1, timeout: float = WAIT, *, about_models: bool = False
    ) -> None:
        """Wait until ``n`` requests have arrived (recorded in ``requests``, or with
        ``about_models`` in ``model_requests``)."""
        arrivals = self.model_requests if about_models else self.requests

        async def arrived() -> None:
            while len(arrivals) < n:
                self._arrived.clear()
                await self._arrived.wait()

        await asyncio.wait_for(arrived(), timeout)

    async def start(self) -> FakeLLMServer:
        if self._sock is not None:  # bound, refusing connections until now
            self._server = await asyncio.start_server(self._serve, sock=self._sock, ssl=self._tls)
        else:
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", self.port, ssl=self._tls
            )
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
        self.connections += 1
        number = self.connections
        try:
            while (req := await _read_request(reader)) is not None:
                req.connection = number
                path = req.path.split("?", 1)[0]
                if is_model_facts(req.method, path):
                    self.model_requests.append(req)
                    self._arrived.set()
                    resp: Response | None = self._model_facts(req, path)
                else:
                    if self.record:
                        self.requests.append(req)
                        self._arrived.set()
                    resp = self._rejected(req)
                    if resp is None and path.endswith("/responses"):
                        refused = check(req.body, self.responses)
                        if refused is not None:  # the script stays for a request it takes
                            resp = HttpError(refused[0], refused[1], {"x-request-id": "req_fake"})
                    if resp is None and self.responder is not None:
                        resp = self.responder(req)
                    if resp is None:
                        resp = self._queue.popleft() if self._queue else self.default
                assert resp is not None
                if not await self._respond(req, resp, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.pop(task, None)
            writer.transport.abort()

    def _rejected(self, req: RecordedRequest) -> Response | None:
        """What the real API would refuse in this request (a scripted reply stays queued)."""
        if self.lenient:
            return None
        path = req.path.split("?", 1)[0]
        vendor = "openai" if path.endswith("/chat/completions") else "anthropic"
        if not path.endswith(("/chat/completions", "/messages")):
            return None
        problem: Response | None = violation(vendor, req.body, self.window)
        return problem

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
        if path.endswith("/responses"):
            vendor = "responses"
        routes = ("/chat/completions", "/messages", "/responses")
        if not (path.endswith(routes) or is_model_facts(req.method, path)):
            resp = HttpError(404, {"error": {"message": f"no route {path}"}})
        model = str(req.body.get("model", "")) if isinstance(req.body, dict) else ""
        if isinstance(req.body, dict):
            if vendor == "anthropic" and (problem := cache_control_error(req.body)):
                resp = anthropic_error(400, "invalid_request_error", problem)
            elif self.billing is not None and isinstance(resp, Reply):
                resp = _billed(resp, vendor, req.body, self.billing.bill(vendor, req.body))
        if isinstance(resp, HttpError | _Json):
            status = resp.status if isinstance(resp, HttpError) else 200
            body = json.dumps(resp.body or {}).encode()
            head = f"HTTP/1.1 {status} {_phrase(status)}\r\n"
            headers = {
                "content-type": "application/json",
                "content-length": str(len(body)),
                **(resp.headers if isinstance(resp, HttpError) else {}),
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
        if isinstance(resp, Frames):
            sse_head = _SSE_HEAD.replace(b"text/event-stream", resp.content_type.encode())
            writer.write(sse_head + b"".join(map(_chunk, resp.frames)) + b"0\r\n\r\n")
            await writer.drain()
            return True
        events = self._events(vendor, resp.steps, model, req.body, resp.done)
        writer.write(_SSE_HEAD)
        hold = resp.hold
        for i, event in enumerate([*events, None]):
            if hold is not None and i and resp.hold_at.encode() in events[i - 1]:
                await writer.drain()
                if not await _held(hold, reader, req):
                    return False  # the client went away meanwhile
                hold = None
            if i == resp.disconnect_after:
                await writer.drain()
                return False  # _serve aborts the socket: no terminating chunk
            if i == resp.hang_after:
                await writer.drain()
                await _wait_eof(reader, req)
                return False
            if i == resp.keepalive_after:
                await _keep_alive(reader, writer, req, KEEPALIVE[vendor], resp.keepalive_every)
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

    def _events(
        self, vendor: str, steps: list[Step], model: str, body: Any, done: bool = True
    ) -> list[bytes]:
        if vendor == "openai":
            return openai_events(steps, model, done)
        if vendor == "responses":
            return responses_events(steps, model, self.responses.issuer(body))
        return anthropic_events(steps, model)

    def _model_facts(self, req: RecordedRequest, path: str) -> Response:
        status, body = model_facts(self.models, self.ollama, req.method, path, req.headers,
                                   req.body)  # fmt: skip
        if status is None:
            assert isinstance(body, HttpError | Hang)
            return body
        return _Json(body) if status == 200 else HttpError(status, body)

    def _burst(self, vendor: str, model: str, burst: Burst) -> bytes:
        key = (vendor, burst.n, burst.text, model, burst.per_event)
        if key not in self._burst_cache:
            steps: list[Step] = [Text(burst.text)] * burst.n
            steps += [Finish("stop"), Usage(burst.n, burst.n)]
            events = self._events(vendor, steps, model, {})
            frames = map(_chunk, events) if burst.per_event else [_chunk(b"".join(events))]
            self._burst_cache[key] = _SSE_HEAD + b"".join(frames) + b"0\r\n\r\n"
        return self._burst_cache[key]


def _billed(reply: Reply, vendor: str, body: dict[str, Any], bill: Bill) -> Reply:
    """``reply`` with the billed usage: in ``message_start`` (Anthropic), or as the last
    chunk when the client asked for it with ``stream_options.include_usage`` (OpenAI)."""
    scripted = next((s for s in reply.steps if isinstance(s, Usage)), None)
    output = scripted.output if scripted else _output_tokens(reply.steps)
    usage = Usage(bill.input, output, bill.cached, bill.cache_write,
                  scripted.reasoning if scripted else 0)  # fmt: skip
    steps: list[Step] = [s for s in reply.steps if not isinstance(s, Usage)]
    if vendor == "anthropic":
        steps.insert(0, usage)
    elif vendor == "responses" or (body.get("stream_options") or {}).get("include_usage"):
        steps.append(usage)  # (the Responses API reports it in response.completed)
    return dataclasses.replace(reply, steps=steps)


def _output_tokens(steps: list[Step]) -> int:
    texts = [s.text for s in steps if isinstance(s, (Text, Thinking, Refusal))]
    texts += [s.name + s.arguments for s in steps if isinstance(s, ToolCall)]
    return -(-sum(map(len, texts)) // 4)


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


async def _keep_alive(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    req: RecordedRequest,
    data: bytes,
    every: float,
) -> None:
    """Send keep-alives until the client goes away (they keep its HTTP read alive)."""
    gone = asyncio.create_task(_wait_eof(reader, req))
    try:
        while not gone.done():
            writer.write(_chunk(data))
            await writer.drain()
            await asyncio.wait({gone}, timeout=every)
    except ConnectionError:
        req.disconnected.set()
    finally:
        gone.cancel()


async def _held(hold: asyncio.Event, reader: asyncio.StreamReader, req: RecordedRequest) -> bool:
    """Wait for ``hold``; False if the client goes away first."""
    waits = [asyncio.ensure_future(hold.wait()), asyncio.ensure_future(_wait_eof(reader, req))]
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return waits[0] in done


async def _wait_eof(reader: asyncio.StreamReader, req: RecordedRequest) -> None:
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass
    req.disconnected.set()


# --------------------------------------------------------------------------- CLI


async def _main(port: int, chunks: int, text: str, per_event: bool) -> None:
    server = FakeLLMServer(default=Burst(chunks, text, per_event), port=port, record=False)
    await server.start()
    print(server.port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Scripted OpenAI/Anthropic SSE server.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=50, help="text chunks per reply")
    parser.add_argument("--text", default="x ", help="text of each chunk")
    parser.add_argument(
        "--per-event", action="store_true", help="one HTTP chunk frame per SSE event"
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port, args.chunks, args.text, args.per_event))
