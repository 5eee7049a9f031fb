"""The benchmarks' model server: OpenAI Chat Completions and Anthropic Messages replies of
``--chunks`` text deltas, streamed as the vendors stream them.

    python tools/bench_server.py --chunks 20000 [--framing event|body] [--gap-us 0]

``event`` (the default): one HTTP chunk frame per SSE event, each written and drained on
its own (``write`` + ``await drain()``), as the vendors' servers send a token at a time;
``--gap-us`` waits between events (a paced model). ``body``: the whole reply in one frame
and one write (the fast fake the benchmarks used before issue 17). ``GET .../models``
lists the model asked for with its window, as vLLM does (the agent asks a compatible
server once, before its first turn). Prints its port.

The events are the fake server's (``tests/fakes/llm_wire.py``), rendered once per reply
shape: the server spends its time writing, not formatting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.llm_wire import Finish, Step, Text, Usage, anthropic_events, openai_events  # noqa: E402

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)
_NOT_FOUND = b'{"detail":"Not Found"}'
_MODELS = b'{"object":"list","data":[{"id":"gpt-4.1","object":"model","max_model_len":1047576}]}'


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class BenchServer:
    def __init__(self, chunks: int, framing: str = "event", text: str = "x ", gap: float = 0.0):
        self.chunks, self.framing, self.text, self.gap = chunks, framing, text, gap
        self._frames: dict[tuple[str, str], list[bytes]] = {}

    def frames(self, vendor: str, model: str) -> list[bytes]:
        key = (vendor, model)
        if key not in self._frames:
            steps: list[Step] = [Text(self.text)] * self.chunks
            steps += [Finish("stop"), Usage(self.chunks, self.chunks)]
            render = openai_events if vendor == "openai" else anthropic_events
            events = render(steps, model)
            if self.framing == "body":
                events = [b"".join(events)]
            self._frames[key] = [_frame(e) for e in events]
        return self._frames[key]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                line = await reader.readline()
                if not line.strip():
                    break
                method, path, _ = line.decode("latin-1").split(" ", 2)
                length = 0
                while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = raw.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if method == "GET" and "/models" in path:  # a list, or a model's description
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(_MODELS), _MODELS)
                    )
                    await writer.drain()
                    continue
                if method != "POST" or not path.split("?")[0].endswith(
                    ("/chat/completions", "/messages")
                ):
                    writer.write(
                        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(_NOT_FOUND), _NOT_FOUND)
                    )
                    await writer.drain()
                    continue
                vendor = "openai" if "/chat/completions" in path else "anthropic"
                model = str(json.loads(body).get("model", "")) if body else ""
                writer.write(_HEAD)
                for frame in self.frames(vendor, model):
                    writer.write(frame)
                    await writer.drain()
                    if self.gap:
                        await asyncio.sleep(self.gap)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        writer.transport.abort()


async def start(server: BenchServer, port: int = 0) -> asyncio.Server:
    return await asyncio.start_server(server.serve, "127.0.0.1", port)


async def _main(args: argparse.Namespace) -> None:
    bench = BenchServer(args.chunks, args.framing, args.text, args.gap_us / 1e6)
    for vendor, model in (("openai", "gpt-4.1"), ("anthropic", "claude-sonnet-4-5")):
        bench.frames(vendor, model)  # rendered now: a first request is not the server's
    srv = await start(bench)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--chunks", type=int, default=50)
    p.add_argument("--text", default="x ")
    p.add_argument("--framing", choices=("event", "body"), default="event")
    p.add_argument("--gap-us", type=float, default=0.0)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(p.parse_args()))
