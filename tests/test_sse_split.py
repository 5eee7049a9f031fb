"""The SSE splitter of ``providers/_wire.py`` in process, on bytes cut at every position:
line endings, comments, fields, multi-line data, a byte-order mark, an unfinished event,
invalid UTF-8, invalid payloads, a body that is not a stream, a compressed body."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import msgspec
import pytest

from acp_agent.errors import ProviderStreamError
from acp_agent.providers._wire import EventStream


class Event(msgspec.Struct):
    n: int = 0
    text: str = ""


class _HttpResponse:
    """Just what the splitter reads of an httpx2 response."""

    def __init__(self, frames: list[bytes], headers: dict[str, str]) -> None:
        self.frames = frames
        self.headers = headers
        self.used = ""

    async def _iterate(self) -> AsyncIterator[bytes]:
        for frame in self.frames:
            yield frame

    def aiter_raw(self) -> AsyncIterator[bytes]:
        self.used = "raw"
        return self._iterate()

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        self.used = "decoded"
        return self._iterate()


class _Manager:
    """An SDK's ``with_streaming_response`` call, as :class:`EventStream` uses it."""

    def __init__(self, response: _HttpResponse) -> None:
        self.http_response = response
        self.closed = False

    async def __aenter__(self) -> _Manager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closed = True


SSE = {"content-type": "text/event-stream; charset=utf-8"}


async def split(frames: list[bytes], headers: dict[str, str] | None = None) -> list[Event]:
    manager = _Manager(_HttpResponse(frames, SSE if headers is None else headers))
    stream = await EventStream(manager, Event, lambda e: e).open()
    try:
        return [event async for event in stream]
    finally:
        await stream.close()
        assert manager.closed


def data(n: int, text: str = "") -> bytes:
    return json.dumps({"n": n, "text": text}, ensure_ascii=False).encode()


#: Every kind of line the spec has, with the three line endings.
STREAM = (
    b"\xef\xbb\xbf: a comment first, after a byte-order mark\n\n"
    b"data: " + data(1, "café") + b"\r\n\r\n"
    b"event: message\rid: 7\rretry: 100\rdata:" + data(2) + b"\r\r"
    b'data: {"n": 3,\ndata\ndata: "text": "a"}\n\n'
    b"id: 9\n\n"  # no data: nothing to dispatch
    b"data\n\n"  # empty data: nothing either
    b": keep-alive\n\n"
    b"data: [DONE]\n\n"
    b"data: " + data(4) + b"\n\n"
    b"data: " + data(5)  # unfinished at the end: dropped, as the spec says
)
EXPECTED = [Event(1, "café"), Event(2), Event(3, "a"), Event(4)]


async def test_the_spec_s_lines_in_one_frame() -> None:
    assert await split([STREAM]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 7])
async def test_frames_cut_anywhere(size: int) -> None:
    """Every cut: mid-mark, mid-CRLF, mid-field, mid-payload."""
    frames = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert await split(frames) == EXPECTED


async def test_every_single_cut() -> None:
    for cut in range(1, len(STREAM)):
        assert await split([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


async def test_one_event_per_frame() -> None:
    """As the vendors send: each frame one whole event (the common case, read fastest)."""
    frames = [
        b"data: " + data(1) + b"\n\n",
        b"event: message\ndata: " + data(2) + b"\n\n",
        b"id: 3\ndata: " + data(3) + b"\n\n",
        b": note\ndata: " + data(4) + b"\n\n",
        b"data: \n\n",  # empty: nothing
        b"data:" + data(5) + b"\n\n",  # no space
        b"data\ndata: " + data(6) + b"\n\n",  # two data lines: one payload, "\n" first
        b"retry: 9\ndata: " + data(7) + b"\n\n",
        b"data: [DONE]\n\n",
    ]
    got = await split(frames)
    assert got[:5] == [Event(1), Event(2), Event(3), Event(4), Event(5)]
    assert got[5:] == [Event(6), Event(7)]


async def test_invalid_utf8_reads_as_replacement_characters() -> None:
    assert await split([b'data: {"text": "a\xffb"}\n\n']) == [Event(0, "a\ufffdb")]


async def test_an_invalid_payload_is_a_stream_error() -> None:
    with pytest.raises(ProviderStreamError, match="invalid stream event"):
        await split([b"data: " + data(1) + b"\n\ndata: {nope\n\n"])


async def test_a_body_that_is_not_an_event_stream() -> None:
    with pytest.raises(ProviderStreamError, match="did not send an event stream"):
        await split([data(1)], {"content-type": "application/json"})


async def test_a_compressed_body_is_read_decoded() -> None:
    response = _HttpResponse([b"data: " + data(1) + b"\n\n"], {**SSE, "content-encoding": "gzip"})
    stream = await EventStream(_Manager(response), Event, lambda e: e).open()
    assert [e async for e in stream] == [Event(1)] and response.used == "decoded"
    response = _HttpResponse([b"data: " + data(1) + b"\n\n"], SSE)
    stream = await EventStream(_Manager(response), Event, lambda e: e).open()
    assert [e async for e in stream] == [Event(1)] and response.used == "raw"
