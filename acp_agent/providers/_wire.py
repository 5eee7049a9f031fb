"""Vendor streams: the SSE events split from the response body's bytes, each ``data:``
payload decoded with msgspec into the small Structs below instead of the SDKs' pydantic
models.

The SDKs still do everything around a stream (request building, auth, base URL, timeouts,
HTTP error mapping): the providers ask them for the raw streaming response
(``with_streaming_response``) and :class:`EventStream` reads its events. The Structs carry
the attribute names the providers' assemblers read.

Why, measured with ``python tools/bench.py --only sse``: this process's CPU per chunk from
the request to the last event, through the real SDKs against tools/bench_server.py,
20,000 chunks, medians of 20 interleaved rounds (5 for the SDK models), 2 cores, load
average 0.4 (issue 17):

    µs/chunk                         one frame per event       whole reply in one frame
                                     OpenAI   Anthropic        OpenAI   Anthropic
    SDK pydantic models                89.9      22.9            72.7      13.0
    httpx-sse + msgspec (issue 13)     10.6      10.6             2.1       2.4
    bytes split + msgspec (this)        8.2       8.0             1.2       1.2

The vendors send one HTTP frame per event, so whatever is done per frame is done per
chunk: httpx-sse decoded every frame to text, split it into line strings and built an
event object before msgspec saw the payload, through three more generator layers; here
the frame's bytes are split once (a frame holding one whole event goes straight to the
decoder) and msgspec decodes the payload bytes. What is left below the decoder is
httpx2's and h11's per-frame work (about 6.5 µs, which the floor, tools/minimal_relay.py,
pays as well). Figures move with machine load: during a parallel test run on the same
cores every figure rose by up to 70%.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

import msgspec

from ..errors import ProviderHTTPError, ProviderStreamError

E = TypeVar("E")

# --------------------------------------------------------------------------- OpenAI


class Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class ToolCallFragment(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: Function | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None  # vLLM, DeepSeek
    reasoning: str | None = None  # Ollama, OpenRouter
    tool_calls: list[ToolCallFragment] | None = None


class Choice(msgspec.Struct):
    index: int = 0
    delta: Delta | None = None
    finish_reason: str | None = None


class PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None


class Chunk(msgspec.Struct):
    choices: list[Choice] | None = None
    usage: Usage | None = None
    error: dict[str, Any] | None = None


def openai_event(chunk: Chunk) -> Chunk | None:
    if chunk.error is not None:
        message = str(chunk.error.get("message") or chunk.error)
        raise ProviderHTTPError(f"the stream reported an error: {message}", 500, message)
    return chunk


# --------------------------------------------------------------------------- OpenAI Responses


class RSummary(msgspec.Struct):
    text: str = ""


class RItem(msgspec.Struct):
    """An output item (``reasoning``, ``message``, ``function_call``...); only what we read."""

    type: str = ""
    id: str = ""
    call_id: str = ""
    name: str = ""
    arguments: str | None = None
    input: str | None = None  # a custom tool call's text
    encrypted_content: str | None = None
    summary: list[RSummary] | None = None


class RInputDetails(msgspec.Struct):
    cached_tokens: int | None = None


class ROutputDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class RUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_tokens_details: RInputDetails | None = None
    output_tokens_details: ROutputDetails | None = None


class RIncomplete(msgspec.Struct):
    reason: str | None = None


class RResponse(msgspec.Struct):
    status: str | None = None
    usage: RUsage | None = None
    incomplete_details: RIncomplete | None = None
    error: dict[str, Any] | None = None


class REvent(msgspec.Struct):
    """One Responses stream event; ``type`` says which of the fields are set."""

    type: str
    delta: str | None = None
    arguments: str | None = None
    item_id: str = ""
    output_index: int = 0
    summary_index: int = 0
    item: RItem | None = None
    response: RResponse | None = None
    code: str | None = None
    message: str | None = None
    error: dict[str, Any] | None = None


_RESPONSES_ERROR_STATUS = {
    "rate_limit_exceeded": 429,
    "context_length_exceeded": 400,
    "invalid_prompt": 400,
    "invalid_request_error": 400,
}


def responses_event(event: REvent) -> REvent | None:
    """In-stream failures (an ``error`` event, ``response.failed``) become HTTP errors with
    the status their code implies (a rate limit is retryable, an invalid prompt is not)."""
    if event.type == "error" or event.type == "response.failed":
        error: dict[str, Any] = {}
        if event.type == "error":
            error = event.error or {"code": event.code, "message": event.message}
        elif event.response is not None:
            error = event.response.error or {}
        code = str(error.get("code") or error.get("type") or "server_error")
        message = str(error.get("message") or code)
        status = _RESPONSES_ERROR_STATUS.get(code, 500)
        raise ProviderHTTPError(f"the stream reported {code}: {message}", status, str(error))
    return event


# --------------------------------------------------------------------------- Anthropic


class AUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class AMessage(msgspec.Struct):
    usage: AUsage | None = None


class ABlock(msgspec.Struct):
    type: str
    text: str | None = None
    thinking: str | None = None
    data: str | None = None
    id: str = ""
    name: str = ""
    input: Any = None


class ADelta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class AEvent(msgspec.Struct):
    type: str
    index: int = 0
    message: AMessage | None = None
    content_block: ABlock | None = None
    delta: ADelta | None = None
    usage: AUsage | None = None
    error: dict[str, Any] | None = None


_ANTHROPIC_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429}


def anthropic_event(event: AEvent) -> AEvent | None:
    if event.type == "error":
        error = event.error or {}
        kind = str(error.get("type", "error"))
        message = f"the stream reported {kind}: {error.get('message', '')}"
        raise ProviderHTTPError(message, _ANTHROPIC_ERROR_STATUS.get(kind, 500), str(error))
    return None if event.type == "ping" else event


# --------------------------------------------------------------------------- SSE

_BOM = b"\xef\xbb\xbf"


class EventStream(Generic[E]):
    """An SDK raw streaming response, iterated as decoded events.

    The response body is split into SSE events as the WHATWG spec says (lines end with
    CRLF, LF or CR; ``:`` comments; ``data`` lines joined by newlines; other fields
    ignored; an event ends at a blank line, an unfinished one at the end of the stream is
    dropped), from the bytes as they arrive, and each ``data`` payload goes to msgspec as
    bytes: no text decoding, no line strings, no event objects in between.

    ``check`` sees every decoded event: it raises for in-stream errors and returns
    ``None`` for events to skip. A provider error raised here after output has started
    is turned into a broken-stream error by :func:`~acp_agent.providers._sdk.relay`, which
    also prefixes every message with the endpoint.
    """

    def __init__(
        self,
        manager: AbstractAsyncContextManager[Any],
        event_type: type[E],
        check: Callable[[E], E | None],
    ) -> None:
        self._manager = manager
        self._decoder = msgspec.json.Decoder(event_type)
        self._check = check
        self._response: Any = None

    async def open(self) -> EventStream[E]:
        self._response = await self._manager.__aenter__()
        return self

    def __aiter__(self) -> AsyncIterator[E]:
        return self._events()

    def _body(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (the SDKs' response wraps an httpx2 one)."""
        response = self._response.http_response
        kind = response.headers.get("content-type", "").partition(";")[0].strip()
        if kind != "text/event-stream":
            raise ProviderStreamError(
                f"the server did not send an event stream (Content-Type {kind!r})"
            )
        coding = response.headers.get("content-encoding", "identity").lower()
        raw: AsyncIterator[bytes] = (
            response.aiter_raw() if coding in ("", "identity") else response.aiter_bytes()
        )
        return raw

    async def _events(self) -> AsyncIterator[E]:
        decode = self._decode
        data: list[bytes] = []  # the data lines of the event being read
        rest = b""  # the unfinished line
        first = True
        async for chunk in self._body():
            if not rest and not data and chunk.endswith(b"\n\n") and b"\r" not in chunk:
                # one whole event in the frame, as the vendors send them: its data line
                line = chunk if chunk.startswith(b"data: ") else chunk[chunk.find(b"\n") + 1 :]
                if (
                    line.startswith(b"data: ")
                    and line.find(b"\n") == len(line) - 2
                    and not (first and chunk.startswith(_BOM))
                    and (chunk is line or chunk.startswith((b"event:", b"id:", b":")))
                ):
                    first = False
                    if len(line) > 8 and (event := decode(line[6:-2])) is not None:
                        yield event
                    continue
            if first:
                first, chunk = False, chunk.removeprefix(_BOM)
            if rest:
                chunk, rest = rest + chunk, b""
            if b"\r" in chunk:
                if chunk.endswith(b"\r"):  # maybe half of a CRLF: wait for the next byte
                    rest, chunk = b"\r", chunk[:-1]
                chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = chunk.split(b"\n")
            rest = lines.pop() + rest
            for line in lines:
                if line:
                    if line.startswith(b"data"):
                        if line[4:5] == b":":
                            data.append(line[6:] if line[5:6] == b" " else line[5:])
                        elif len(line) == 4:
                            data.append(b"")
                    continue  # comments, event names, ids, retry hints
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    data.clear()
                    if payload and (event := decode(payload)) is not None:
                        yield event

    def _decode(self, payload: bytes | str) -> E | None:
        if isinstance(payload, bytes):
            if payload.startswith(b"[DONE]"):
                return None
        elif payload.startswith("[DONE]"):
            return None
        try:
            event = self._decoder.decode(payload)
        except msgspec.DecodeError as exc:
            if isinstance(payload, bytes):  # invalid UTF-8 reads as U+FFFD, as text would
                return self._decode(payload.decode("utf-8", "replace"))
            raise ProviderStreamError(
                f"the server sent an invalid stream event ({exc}): {payload[:120]}"
            ) from None
        return self._check(event)

    async def close(self) -> None:
        if self._response is not None:
            self._response = None
            await self._manager.__aexit__(None, None, None)
