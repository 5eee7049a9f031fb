"""A minimal hand-written msgspec ACP agent: the start-up baseline for tools/bench.py.

It answers ``initialize`` and ``session/new`` and nothing else; it exists only so the
benchmark can report our start-up next to the cheapest possible Python agent.
"""

import asyncio
import sys

import msgspec


class Msg(msgspec.Struct):
    jsonrpc: str
    id: int | str | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    dec = msgspec.json.Decoder(Msg)
    enc = msgspec.json.Encoder()
    out = sys.stdout.buffer
    while line := await reader.readline():
        m = dec.decode(line)
        if m.method == "initialize":
            result: dict[str, object] = {"protocolVersion": 1, "agentCapabilities": {}}
        elif m.method == "session/new":
            result = {"sessionId": "s1"}
        else:
            continue
        out.write(enc.encode({"jsonrpc": "2.0", "id": m.id, "result": result}) + b"\n")
        out.flush()


asyncio.run(main())
