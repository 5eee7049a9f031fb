"""``acp-agent serve`` for tools/bench.py (``--only serve``): the network transports
against stdio, measured in the same run, in turn, on the offline model.

  round trip   a small request (``auth/status``, answered from memory) sent when the last
               answer came: median latency and the agent's CPU per request
  stream       one prompt streaming N chunks: the agent's CPU per chunk and chunks/s
  100 at once  100 WebSocket (and 100 Streamable HTTP) connections of one process each
               streaming a prompt at the same time, against one connection streaming the
               same prompt alone: CPU per chunk

Over WebSocket (``websockets``, no compression) and Streamable HTTP (``httpx``,
HTTP/1.1: a POST per message, the answers on the SSE streams), each against the stdio
agent. CPU is the agent process's (``bench_stream.cpu_seconds``); the clients run here.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import websockets
from bench_stream import cpu_seconds

CHUNK = b"agent_message_chunk"


class Remote:
    """A bare client of one profile: requests, and a count of streamed chunks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids = 0
        self.waiters: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.chunks = 0
        self.tasks: list[asyncio.Task[None]] = []

    def received(self, text: str | bytes) -> None:
        data = text.encode() if isinstance(text, str) else text
        if CHUNK in data:
            self.chunks += 1
            return
        message = json.loads(data)
        if "method" not in message and message.get("id") in self.waiters:
            self.waiters.pop(message["id"]).set_result(message)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiters[self.ids] = future
        await self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params},
                        params.get("sessionId"))  # fmt: skip
        return await future

    async def send(self, message: dict[str, Any], session: str | None) -> None:
        raise NotImplementedError

    async def open(self, cwd: str) -> str:
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        result = await self.request("session/new", {"cwd": cwd, "mcpServers": []})
        return str(result["result"]["sessionId"])

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()


class Ws(Remote):
    async def connect(self) -> Ws:
        self.socket = await websockets.connect(self.url.replace("http", "ws", 1),
                                               compression=None, max_size=None)  # fmt: skip
        self.tasks.append(asyncio.ensure_future(self._read()))
        return self

    async def _read(self) -> None:
        async for frame in self.socket:
            self.received(frame)

    async def send(self, message: dict[str, Any], session: str | None) -> None:
        await self.socket.send(json.dumps(message))

    async def close(self) -> None:
        await self.socket.close()
        await super().close()


class Http(Remote):
    async def connect(self) -> Http:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        self.http = httpx.AsyncClient(timeout=None, limits=limits)
        self.connection: str | None = None
        return self

    def _headers(self, session: str | None) -> dict[str, str]:
        out = {"content-type": "application/json"}
        if self.connection:
            out["acp-connection-id"] = self.connection
        if session:
            out["acp-session-id"] = session
        return out

    async def send(self, message: dict[str, Any], session: str | None) -> None:
        body = json.dumps(message)
        response = await self.http.post(self.url, content=body, headers=self._headers(session))
        if message["method"] == "initialize":
            self.connection = response.headers["acp-connection-id"]
            self.tasks.append(asyncio.ensure_future(self._stream(None)))
            self.received(response.content)

    def received(self, text: str | bytes) -> None:
        super().received(text)
        if b"sessionId" in (text if isinstance(text, bytes) else text.encode()):
            found = re.search(rb'"result":\{"sessionId":"([^"]+)"', text if isinstance(
                text, bytes) else text.encode())  # fmt: skip
            if found:
                self.tasks.append(asyncio.ensure_future(self._stream(found[1].decode())))

    async def _stream(self, session: str | None) -> None:
        headers = {"accept": "text/event-stream", **self._headers(session)}
        async with self.http.stream("GET", self.url, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    self.received(line[6:])

    async def close(self) -> None:
        await super().close()
        await self.http.aclose()


async def start_server(tmp: str, script: str) -> tuple[Any, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acp_agent", "serve", "--listen", "127.0.0.1:0",
        "--insecure-no-auth", "--state-dir", tmp, "--max-connections", "512",
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent),
             "ACP_AGENT_OFFLINE_SCRIPT": script, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.stderr
    line = await proc.stderr.readline()
    found = re.search(rb"listening on (\S+)", line)
    assert found, line
    return proc, found[1].decode()


async def _round_trips(request: Callable[[], Any], pid: int, n: int) -> tuple[float, float]:
    for _ in range(20):
        await request()
    times = []
    cpu0 = cpu_seconds(pid)
    for _ in range(n):
        t0 = time.perf_counter()
        await request()
        times.append(time.perf_counter() - t0)
    cpu = cpu_seconds(pid) - cpu0
    times.sort()
    return times[len(times) // 2] * 1e3, cpu / n * 1e6


async def _stream(prompt: Callable[[], Any], counted: Callable[[], int], pid: int
                  ) -> tuple[float, float]:  # fmt: skip
    before = counted()
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    await prompt()
    dt = time.perf_counter() - t0
    n = counted() - before
    return (cpu_seconds(pid) - cpu0) / n * 1e6, n / dt


def _prompt(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}


async def _stdio(agent_class: Any, agent_cmd: Any, tmp: str, script: str) -> dict[str, float]:
    """The stdio agent: the baseline of each figure."""
    stdio = agent_class(*agent_cmd("--state-dir", tmp), env={"ACP_AGENT_OFFLINE_SCRIPT": script})
    await stdio.start()
    sid = await stdio.init_and_session(tmp)
    rt, per_request = await _round_trips(lambda: stdio.request("auth/status", {}),
                                         stdio.proc.pid, 300)  # fmt: skip
    counter = {"n": 0}

    def count(line: bytes) -> None:
        counter["n"] += CHUNK in line

    stdio.on_update = count
    await stdio.request("session/prompt", _prompt(sid))  # warm
    cpu, rate = await _stream(lambda: stdio.request("session/prompt", _prompt(sid)),
                              lambda: counter["n"], stdio.proc.pid)  # fmt: skip
    await stdio.close()
    return {"stdio_round_trip_ms": rt, "stdio_cpu_us_per_request": per_request,
            "stdio_cpu_us_per_chunk": cpu, "stdio_chunks_per_s": rate}  # fmt: skip


async def bench_serve(agent_class: Any, agent_cmd: Any, median: Any, tmp: str, runs: int,
                      chunks: int) -> dict[str, float]:  # fmt: skip
    script = Path(tmp) / "serve.json"
    script.write_text(json.dumps([[{"text": "w " * (2 * chunks)}]] * 8))
    results: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        results.setdefault(key, []).append(value)

    for _ in range(runs):
        for key, value in (await _stdio(agent_class, agent_cmd, tmp, str(script))).items():
            note(key, value)

        server, url = await start_server(tmp, str(script))
        try:
            for name, kind in (("ws", Ws), ("http", Http)):
                client = await kind(url).connect()
                sid = await client.open(tmp)
                rt, cpu = await _round_trips(lambda c=client: c.request("auth/status", {}),
                                             server.pid, 300)  # fmt: skip
                note(f"{name}_round_trip_ms", rt)
                note(f"{name}_cpu_us_per_request", cpu)
                await client.request("session/prompt", _prompt(sid))  # warm
                cpu, rate = await _stream(
                    lambda c=client, s=sid: c.request("session/prompt", _prompt(s)),
                    lambda c=client: c.chunks, server.pid)  # fmt: skip
                note(f"{name}_cpu_us_per_chunk", cpu)
                note(f"{name}_chunks_per_s", rate)
                await client.close()
        finally:
            server.kill()
            await server.wait()
    out = {key: median(values) for key, values in results.items()}
    for name in ("ws", "http"):
        out[f"{name}_round_trip_vs_stdio"] = (
            out[f"{name}_round_trip_ms"] / out["stdio_round_trip_ms"])
        out[f"{name}_cpu_per_chunk_vs_stdio"] = (
            out[f"{name}_cpu_us_per_chunk"] / out["stdio_cpu_us_per_chunk"])
    out.update(await bench_many(tmp, chunks // 10))
    out["serve_chunks"] = chunks
    return out


async def bench_many(tmp: str, chunks: int, n: int = 100) -> dict[str, float]:
    """``n`` connections streaming at once against one alone (each its first prompt)."""
    script = Path(tmp) / "many.json"
    script.write_text(json.dumps([[{"text": "w " * (2 * chunks)}]] * 2))
    out: dict[str, float] = {}
    server, url = await start_server(tmp, str(script))
    try:
        for name, kind in (("ws", Ws), ("http", Http)):
            one = await kind(url).connect()
            sid = await one.open(tmp)
            cpu, _ = await _stream(lambda c=one, s=sid: c.request("session/prompt", _prompt(s)),
                                   lambda c=one: c.chunks, server.pid)  # fmt: skip
            await one.close()
            clients = [await kind(url).connect() for _ in range(n)]
            sids = await asyncio.gather(*(c.open(tmp) for c in clients))

            async def everyone(cs: list[Remote] = clients, ss: list[str] = sids) -> None:
                await asyncio.gather(*(c.request("session/prompt", _prompt(s))
                                       for c, s in zip(cs, ss, strict=True)))  # fmt: skip

            many, rate = await _stream(everyone, lambda cs=clients: sum(c.chunks for c in cs),
                                       server.pid)  # fmt: skip
            for c in clients:
                await c.close()
            out[f"{name}_one_connection_cpu_us_per_chunk"] = cpu
            out[f"{name}_{n}_connections_cpu_us_per_chunk"] = many
            out[f"{name}_{n}_connections_chunks_per_s"] = rate
            out[f"{name}_{n}_connections_vs_one"] = many / cpu
    finally:
        server.kill()
        await server.wait()
    out["many_chunks_per_connection"] = chunks
    return out
