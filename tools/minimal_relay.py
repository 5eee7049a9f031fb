"""The floor of the streaming path, for tools/bench.py: a minimal relay from a model's SSE
stream to ACP ``session/update`` lines, with nothing the agent has around it.

    python tools/minimal_relay.py <openai|anthropic> <base URL>

It answers ``initialize``, ``session/new`` and ``session/prompt``; a prompt is one
streamed request through httpx2 (the transport both official SDKs use, one pooled client)
-> ``aiter_lines`` -> ``data:`` payloads decoded with msgspec -> one ACP
``agent_message_chunk`` line per text delta -> the response. Lines go to stdout as the
agent writes them (``rpc/framing.PipeWriter``): those of one loop turn in one ``write``.
No SDK, no retries, no log, no history: what is left is the cost of the path itself,
which the agent's per-chunk CPU is compared with.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import httpx2
import msgspec


class Msg(msgspec.Struct):
    jsonrpc: str
    id: int | str | None = None
    method: str | None = None


class ODelta(msgspec.Struct):
    content: str | None = None


class OChoice(msgspec.Struct):
    delta: ODelta | None = None


class OChunk(msgspec.Struct):
    choices: list[OChoice] | None = None


class ADelta(msgspec.Struct):
    text: str | None = None


class AEvent(msgspec.Struct):
    type: str
    delta: ADelta | None = None


class Text(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class Chunk(msgspec.Struct, tag="agent_message_chunk", tag_field="sessionUpdate"):
    content: Text
    messageId: str


class Params(msgspec.Struct):
    sessionId: str
    update: Chunk


class Note(msgspec.Struct):
    jsonrpc: str
    method: str
    params: Params


class Out:
    """stdout, one ``write`` per loop turn (blocking: the benchmark's reader keeps up)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.loop = asyncio.get_running_loop()

    def write(self, line: bytes) -> None:
        if not self.lines:
            self.loop.call_soon(self.flush)
        self.lines.append(line)

    def flush(self) -> None:
        data, self.lines = b"".join(self.lines), []
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]


async def relay(client: httpx2.AsyncClient, out: Out, vendor: str, url: str) -> None:
    if vendor == "openai":
        body: dict[str, Any] = {"model": "gpt-4.1", "stream": True,
                                "messages": [{"role": "user", "content": "go"}]}  # fmt: skip
        decoder: Any = msgspec.json.Decoder(OChunk)
        url += "/chat/completions"
    else:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True,
                "messages": [{"role": "user", "content": "go"}]}  # fmt: skip
        decoder = msgspec.json.Decoder(AEvent)
        url += "/v1/messages"
    encode = msgspec.json.Encoder().encode
    async with client.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = decoder.decode(line[6:])
            if vendor == "openai":
                delta = event.choices[0].delta if event.choices else None
                text = delta.content if delta is not None else None
            else:
                text = event.delta.text if event.delta is not None else None
            if text:
                note = Note("2.0", "session/update", Params("s1", Chunk(Text(text), "m1")))
                out.write(encode(note) + b"\n")


async def main(vendor: str, url: str) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    dec = msgspec.json.Decoder(Msg)
    enc = msgspec.json.Encoder()
    out = Out()
    async with httpx2.AsyncClient(timeout=600) as client:
        while line := await reader.readline():
            m = dec.decode(line)
            result: dict[str, object]
            if m.method == "initialize":
                result = {"protocolVersion": 1, "agentCapabilities": {}}
            elif m.method == "session/new":
                result = {"sessionId": "s1"}
            elif m.method == "session/prompt":
                await relay(client, out, vendor, url)
                result = {"stopReason": "end_turn"}
            else:
                continue
            out.write(enc.encode({"jsonrpc": "2.0", "id": m.id, "result": result}) + b"\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
