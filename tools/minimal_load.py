"""The floor of ``session/load``, for tools/bench.py (issue 30): a process that answers
``initialize`` and ``session/load`` by reading the session's log, decoding every line
(msgspec, generic: no types) and writing one ``session/update`` line per update the log
holds (a prompt's blocks as ``user_message_chunk``s), then the response. No state, no
transcript, no subagents: decoding and encoding only, what any replay costs.

    python tools/minimal_load.py <state dir>
"""

from __future__ import annotations

import asyncio
import os
import sys

import msgspec


class Msg(msgspec.Struct):
    jsonrpc: str
    id: int | str | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")


class Load(msgspec.Struct):
    sessionId: str


def replay(path: str, sid: str, out: int) -> None:
    encode = msgspec.json.Encoder().encode
    decode = msgspec.json.Decoder().decode_lines
    rest = b""
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            data = rest + block
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            lines = []
            for record in decode(data[:cut]):
                kind = record.get("r")
                if kind == "update":
                    updates = [record["update"]]
                elif kind == "prompt":
                    mid = record["message_id"]
                    updates = [{"sessionUpdate": "user_message_chunk", "content": b,
                                "messageId": mid} for b in record["blocks"]]
                else:
                    continue
                for update in updates:
                    note = {"jsonrpc": "2.0", "method": "session/update",
                            "params": {"sessionId": sid, "update": update}}  # fmt: skip
                    lines.append(encode(note) + b"\n")
            data = memoryview(b"".join(lines))
            while data:
                data = data[os.write(out, data) :]


async def main(state: str) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    dec = msgspec.json.Decoder(Msg)
    enc = msgspec.json.Encoder()
    while line := await reader.readline():
        m = dec.decode(line)
        if m.method == "initialize":
            result: dict[str, object] = {"protocolVersion": 1, "agentCapabilities": {}}
        elif m.method == "session/load":
            sid = msgspec.json.decode(m.params, type=Load).sessionId
            replay(os.path.join(state, "sessions", sid + ".jsonl"), sid, 1)
            result = {}
        else:
            continue
        os.write(1, enc.encode({"jsonrpc": "2.0", "id": m.id, "result": result}) + b"\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
