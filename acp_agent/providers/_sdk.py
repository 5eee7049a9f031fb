"""What the SDK-backed providers share: relaying an SDK stream through an assembler,
translating SDK and transport errors once, ``Retry-After``, and tool-argument parsing.

Both official SDKs have the same shape (``APIStatusError`` with ``status_code``, ``body``
and ``response``, ``APITimeoutError``, ``APIConnectionError``), so one translation serves
both; it matches by class name so neither SDK is imported here. Every message names the
endpoint (an :class:`Origin`) and says what went wrong in words a person can act on: the
vendor's own error message, the variable holding a rejected key, a refused connection.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import quote

import msgspec

from .. import log
from ..conversation import TextPart, ToolSpec, UserMessage
from ..errors import (
    ProviderAuthError,
    ProviderConnectionError,
    ProviderContextError,
    ProviderError,
    ProviderHTTPError,
    ProviderStreamError,
)
from ._http import KEEP_IDLE
from .base import ModelRequest, StreamEvent


def body_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body ``params`` stand for: their ``extra_body`` (what SDKs call the
    fields they do not name) merged over the rest."""
    body = {k: v for k, v in params.items() if k != "extra_body"}
    body.update(params.get("extra_body") or {})
    return body


#: The SDKs' own header asking for the response unread (``with_streaming_response``).
_STREAMED = {"X-Stainless-Raw-Response": "stream"}


class Posted:
    """``POST path`` of ``body`` through an SDK ``client``, the response streamed: an async
    context manager giving the SDK's raw response (``.http_response``), as the SDKs'
    ``with_streaming_response.create`` does, but with the body already encoded.

    Both SDKs' ``create`` pass every argument through ``maybe_transform`` (walking every
    message and tool schema to rename aliased fields and format dates: 0.8 ms with one
    message and 41 ms with 301, OpenAI's SDK, measured here) and encode the result with
    the standard library's JSON (~10 % of a prompt's CPU): neither does anything to a
    body already in the vendor's wire format. The providers encode theirs with msgspec,
    the history's earlier messages once (:mod:`.history`), and the SDK's ``post`` sends
    the bytes (``content``: openai 2.16, anthropic 0.76); the URL, headers, auth,
    timeouts and errors stay the SDK's."""

    __slots__ = ("_body", "_client", "_path", "_response")

    def __init__(self, client: Any, path: str, body: bytes) -> None:
        self._client, self._path, self._body = client, path, body
        self._response: Any = None

    async def __aenter__(self) -> Any:
        self._response = await self._client.post(
            self._path,
            cast_to=object,
            content=self._body,
            options={"headers": _STREAMED},
            stream=True,
            stream_cls=None,
        )
        return self._response

    async def __aexit__(self, *exc: object) -> None:
        if self._response is not None:
            await self._response.close()


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a provider's requests go, for error messages."""

    vendor: str
    """``"OpenAI"``, ``"Anthropic"``."""
    endpoint: str
    """The base URL."""
    model: str
    section: str
    """The configuration section (``openai``), to name ``[openai] timeout``."""
    key_env: str | None = None
    """The variable the key comes from (``OPENAI_API_KEY``), if any."""
    has_key: bool = True
    """A key was sent (a local server may be reached without one)."""
    timeout: float = 600.0
    connect_timeout: float = 10.0

    @property
    def where(self) -> str:
        return f"{self.vendor} at {self.endpoint}"


class _Source(Protocol):
    """An SDK stream: async-iterable and closable."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


class _Assembler(Protocol):
    started: bool  # events were produced, so a failure now breaks a started answer

    def feed(self, item: Any) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


async def relay(
    open_stream: Callable[[], Awaitable[_Source]], assembler: _Assembler, origin: Origin
) -> AsyncIterator[StreamEvent]:
    """Open an SDK stream, feed its items to ``assembler`` and yield the events; vendor errors
    are translated with :func:`map_sdk_error`, and errors the stream itself reports (an error
    event, an invalid event, a missing finish) name ``origin``. The SDK stream is closed on
    every exit, cancellation included, which closes the HTTP connection of an unfinished
    response."""
    try:
        source = await open_stream()
    except ProviderError:
        raise
    except Exception as exc:
        raise map_sdk_error(exc, origin, started=False) from exc
    try:
        iterator = aiter(source)
        while True:
            try:
                events = assembler.feed(await anext(iterator))
            except StopAsyncIteration:
                break
            except ProviderError as exc:
                if assembler.started and not isinstance(exc, ProviderStreamError):
                    raise ProviderStreamError(f"{origin.where}: {exc.message}") from exc
                raise _located(exc, origin) from None
            except Exception as exc:
                raise map_sdk_error(exc, origin, started=assembler.started) from exc
            for event in events:
                yield event
    finally:
        await source.close()
    try:
        last = assembler.finish()
    except ProviderError as exc:
        raise _located(exc, origin) from None
    for event in last:
        yield event


#: What a rehearsal asks: a system prompt, a user message, a tool, a cache key (every part
#: of a real request's building runs once).
REHEARSAL = ModelRequest(
    system="Rehearsal.",
    messages=[UserMessage([TextPart("Rehearse.")])],
    tools=[ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})],
    cache_key="rehearsal",
)


def rehearse(
    stream: Callable[[Any], AsyncIterator[StreamEvent]],
    make_client: Callable[[str], Any],
    body: bytes,
) -> None:
    """Run one request through the whole streaming path (the SDK, httpx2's connection pool,
    h11, anyio's sockets, the SSE split, the assembler) against a server on a loopback
    port of this process that answers ``body`` (an SSE stream): nothing reaches the
    model's server. The SDKs, httpx2 and anyio build much of their machinery on first use
    (type adapters, transforms, backends); a rehearsal in a worker thread, on an event
    loop of its own, takes that cost off the first prompt. ``make_client(base_url)``
    builds an SDK client, ``stream(client)`` streams the rehearsal request with it.
    Never raises."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    async def run() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = make_client(f"http://127.0.0.1:{port}/v1")
        try:
            async for _ in stream(client):
                pass
        finally:
            await client.close()
            server.close()

    try:
        asyncio.run(run())
    except Exception as exc:  # a rehearsal only warms: whatever fails, the real request tells
        log.debug("rehearsal failed", error=repr(exc))


CONNECT_TIMEOUT = 5.0
"""Seconds a connection made ahead (:class:`Ahead`) may take, all told."""


async def connect_ahead(client: Any, path: str, timeout: float = CONNECT_TIMEOUT) -> bool:
    """One small read-only ``GET path`` through ``client`` (an SDK client; e.g. the model's
    description), its answer read whole and not used: the connection (TCP, TLS) goes back
    to the client's pool for the next request, and the SDK has built what it builds on a
    client's first request (its platform headers, in a worker thread). Whether the server
    answered (with any HTTP status). Never raises: the first request reports what is
    wrong."""
    options = {"timeout": timeout, "follow_redirects": False}  # keys stay with the host
    try:
        async with asyncio.timeout(timeout):
            await client.get(path, cast_to=bytes, options=options)
    except Exception as exc:
        answered = getattr(exc, "status_code", None) is not None
        log.debug("connect ahead", path=path, answered=answered, reason=repr(exc))
        return answered
    return True


class Ahead:
    """A provider's connections made ahead of its prompts (when a session opens, so that
    its first prompt does not wait for a connection): one at a time, and none while one
    made or used in the last :attr:`FRESH` seconds may still be idle in the SDK client's
    pool (kept :data:`._http.KEEP_IDLE` seconds)."""

    FRESH = KEEP_IDLE - 10.0

    def __init__(self) -> None:
        self._at = float("-inf")  # when a connection was last made ahead or used
        self._busy = False

    def used(self) -> None:
        """A request is starting: its connection will be in the pool after it."""
        self._at = time.monotonic()

    async def connect(self, send: Callable[[], Awaitable[bool]]) -> None:
        """``send()``: make the connection with a request; whether the server answered.
        Never raises (no key, a client that cannot be built: the first prompt says)."""
        if self._busy or time.monotonic() - self._at < self.FRESH:
            return
        self._busy = True
        try:
            answered = await send()
        except Exception as exc:
            log.debug("no connection ahead", reason=repr(exc))
            answered = False
        finally:
            self._busy = False
        if answered:
            self._at = time.monotonic()
        log.debug("connected ahead", answered=answered)


def path_segment(name: str) -> str:
    """``name`` as one segment of a URL's path (``/``, ``?``, ``#`` escaped; ``.`` and ``..``
    too, which would otherwise be resolved as the path's own dots)."""
    return quote(name, safe="") if name not in (".", "..") else name.replace(".", "%2E")


async def failed(exc: ProviderError) -> AsyncIterator[StreamEvent]:
    """A stream that fails with ``exc`` when iterated (a provider that cannot even start)."""
    raise exc
    yield  # pragma: no cover - makes this an async generator


def _located(exc: ProviderError, origin: Origin) -> ProviderError:
    """``exc`` with a message that starts with where it came from."""
    exc.message = f"{origin.where}: {exc.message}"
    exc.args = (exc.message,)
    return exc


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                pass
    value = headers.get("retry-after")
    import email.utils  # only on this rare path: it costs ~20 ms to import

    try:
        when = email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None
    return None if when is None else max(0.0, when.timestamp() - time.time())


def parse_tool_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """The argument object, or ``({}, error)`` when the text is not a JSON object."""
    if not text.strip():
        return {}, None
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        return {}, f"tool arguments are not valid JSON ({exc}): {text[:200]}"
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got: {text[:200]}"
    return value, None


# --------------------------------------------------------------------------- errors

_SAYS = {
    400: "the request was rejected",
    408: "the server timed out reading the request",
    409: "conflict",
    413: "the request is too large",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
    529: "overloaded",
}
_NO_QUOTA = {"insufficient_quota", "billing_error"}
_TIMEOUTS = {"TimeoutException", "APITimeoutError", "ReadTimeout", "WriteTimeout", "PoolTimeout"}


def map_sdk_error(exc: Exception, origin: Origin, *, started: bool) -> ProviderError:
    """Translate an ``openai``/``anthropic`` SDK (or httpx) exception. ``started``: events were
    already yielded, so a broken connection is a broken stream rather than a failed request.

    Matched by class name so it holds for either SDK and its transport (httpx or httpx2)
    without importing them here."""
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if "APIStatusError" in kinds and isinstance(status, int) and response is not None:
        return _status_error(exc, status, response, origin)
    chain = _chain(exc)
    names = {cls.__name__ for e in chain for cls in type(e).__mro__}
    if names & (_TIMEOUTS | {"APIConnectionError", "TransportError", "ConnectTimeout"}):
        reason = _transport_reason(chain, names, origin)
        if started:  # a stall or a cut after output: the answer is broken, not retryable as is
            return ProviderStreamError(f"The stream from {origin.where} broke off: {reason}")
        if names & {"ConnectError", "ConnectTimeout"}:
            error = ProviderConnectionError(f"Cannot connect to {origin.endpoint}: {reason}")
            error.unreachable = reason == "connection refused" or reason.startswith("host not")
            return error
        return ProviderConnectionError(f"The request to {origin.where} failed: {reason}")
    return ProviderStreamError(f"{origin.where}: the stream failed: {type(exc).__name__}: {exc}")


def _status_error(exc: Exception, status: int, response: Any, origin: Origin) -> ProviderError:
    said, kind = vendor_message(exc, response)
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:  # Anthropic's 529
        phrase = ""
    tail = f" (HTTP {status}{phrase})" + (f": {said}" if said else "")
    if status in (401, 403):
        key = f"the API key in {origin.key_env}" if origin.key_env else "the API key"
        if status == 403:
            what = (f"{key} is not allowed to do this (another key, or its permissions at"
                    " the provider: `acp-agent login` stores another)")
        elif origin.has_key:
            what = f"{key} was rejected (`acp-agent login` stores another)"
        else:
            env = origin.key_env or "one"
            what = f"an API key is required (set {env} or run `acp-agent login`)"
        return ProviderAuthError(f"{origin.where}: {what}{tail}", status)
    if status == 404:
        what = f"model `{origin.model}` not found, or the base URL is wrong"
    elif kind in _NO_QUOTA:
        what = "out of quota or credit"
    else:
        what = _SAYS.get(status, "server error" if status >= 500 else "the request was rejected")
    headers = response.headers
    too_long = status in (400, 413) and is_context_overflow(said, kind)
    if too_long:
        what = "the conversation is longer than the model's context window"
    error = (ProviderContextError if too_long else ProviderHTTPError)(
        f"{origin.where}: {what}{tail}", status, _body(response), parse_retry_after(headers)
    )
    should_retry = headers.get("x-should-retry")  # the vendors' own say, as their SDKs obey it
    if should_retry in ("true", "false"):
        error.retryable = should_retry == "true"
    if kind in _NO_QUOTA:  # waiting does not buy credit
        error.retryable = False
    if isinstance(error, ProviderContextError):
        error.limit = window_limit(said)
    return error


_OVERFLOW = (
    "prompt is too long",  # Anthropic
    "maximum context length",  # OpenAI, vLLM
    "context_length_exceeded",
    "context length",  # llama.cpp, LM Studio
    "too many tokens",
    "exceeds the context window",
)


_LIMITS = (
    re.compile(r"> ?([\d,]+) (?:tokens )?maximum"),  # Anthropic: "123 tokens > 100 maximum"
    re.compile(r"maximum context length is ([\d,]+)"),  # OpenAI, vLLM
    re.compile(r"context (?:length|window|size)(?: of| is)? ([\d,]+)"),  # llama.cpp & co.
)


def window_limit(message: str) -> int | None:
    """The window a context-length error names, if it names one."""
    for pattern in _LIMITS:
        match = pattern.search(message)
        if match:
            return int(match.group(1).replace(",", ""))
    return None


def is_context_overflow(message: str, kind: str | None) -> bool:
    """Whether a 400's message (or code) says the request did not fit the window."""
    text = f"{kind or ''} {message}".lower()
    return any(marker in text for marker in _OVERFLOW)


def vendor_message(exc: Exception, response: Any) -> tuple[str, str | None]:
    """The vendor's own error message and its type or code, from the body both vendors
    shape alike (OpenAI ``{"error": {"message", "type", "code"}}``, Anthropic
    ``{"type": "error", "error": {"type", "message"}}``); else the body's text."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = error.get("message")
        kind = error.get("code") or error.get("type")
        if isinstance(message, str) and message.strip():
            return message.strip(), kind if isinstance(kind, str) else None
    elif isinstance(error, str) and error.strip():  # Ollama: {"error": "model 'x' not found"}
        return error.strip()[:500], None
    return " ".join(_body(response).split())[:500], None


def _body(response: Any) -> str:
    try:
        return str(response.text)
    except Exception:  # the body was never read
        return ""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out and len(out) < 16:
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _transport_reason(chain: list[BaseException], names: set[str], origin: Origin) -> str:
    """What went wrong on the wire, in words."""
    section = origin.section
    if "ConnectTimeout" in names:
        return f"no connection within {origin.connect_timeout:g} s ([{section}] connect-timeout)"
    if names & _TIMEOUTS:
        return f"no data for {origin.timeout:g} s ([{section}] timeout)"
    if "ConnectionRefusedError" in names:
        return "connection refused"
    if "RemoteProtocolError" in names:
        return "the server closed the connection before the answer was complete"
    if "ConnectionResetError" in names:
        return "the connection was reset"
    for e in chain:
        if type(e).__name__ == "gaierror":
            return f"host not found ({getattr(e, 'strerror', None) or e})"
        if type(e).__name__.startswith("SSL"):
            return f"TLS error: {e}"
    for e in reversed(chain):  # the root cause says the most
        text = getattr(e, "strerror", None) or str(e)
        if text and text != "Connection error.":
            return str(text)
    return type(chain[-1]).__name__
