"""Benchmarks of the agent as editors see it: a fresh ``acp-agent`` process per sample.

    python tools/bench.py                  # everything, medians over --runs spawns
    python tools/bench.py --only startup   # one measure (startup, stream, cancel, exit, encode,
                                           # load, sse)

Measures (medians):
  startup   spawn -> ``initialize`` reply; ``session/new`` round trip; RSS after start
  stream    chunks/s end to end and agent CPU per chunk, on the offline model (script)
            and through the real OpenAI SDK against the local fake server (tests/fakes);
            time to first chunk; peak RSS after the provider loaded
  cancel    ``session/cancel`` -> ``cancelled`` response while streaming
  exit      stdin closed -> process gone (during a running turn)
  encode    in-process agent CPU to encode and write one ``session/update``
  load      ``session/load`` of a 1,000-turn session (replay streamed, then the response)
  sse       in-process agent CPU per chunk to decode a streamed reply through the real
            SDKs' ``with_streaming_response`` against the fake server: providers/_wire.py
            (httpx-sse + msgspec), the hand-written parser it replaced (+ msgspec), and the
            SDK's own pydantic models; both vendors; the reply in one HTTP chunk frame
            (``body``) or one frame per SSE event (``event``, as the vendors send)
  context   the fixed overhead of every request in tokens; a 60-call session against a
            40 k-token window: peak request, summaries, stubs (bench_context.py)
  cost      input cost of a scripted 10-turn coding session with prompt caching on and off,
            per provider, against the fake server billing as the vendors do (bench_cost.py)

Nothing here asserts: the figures go into issue notes. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def _rss_mb(pid: int, key: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Agent:
    """A bare client: just enough JSON-RPC to drive the agent, with minimal overhead."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.ids = 0
        self.waiters: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.on_update: Any = None

    async def start(self) -> float:
        t0 = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            *self.args,
            stdin=-1,
            stdout=-1,
            stderr=asyncio.subprocess.DEVNULL,
            env=self.env,
            limit=1 << 26,
        )
        self.reader = asyncio.create_task(self._read())
        return t0

    async def _read(self) -> None:
        assert self.proc.stdout
        while line := await self.proc.stdout.readline():
            if b'"session/update"' in line[:80] or b'"method":"session/update"' in line:
                if self.on_update is not None:
                    self.on_update(line)
                continue
            msg = json.loads(line)
            if "method" in msg and "id" in msg:  # permission: allow
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
            elif "id" in msg and msg["id"] in self.waiters:
                self.waiters.pop(msg["id"]).set_result(msg)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        self.ids += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiters[self.ids] = fut
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        return fut

    async def init_and_session(self, cwd: str) -> str:
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return str(
            (await self.request("session/new", {"cwd": cwd, "mcpServers": []}))["result"][
                "sessionId"
            ]
        )

    async def close(self) -> float:
        assert self.proc.stdin
        t0 = time.perf_counter()
        self.proc.stdin.close()
        await self.proc.wait()
        dt = time.perf_counter() - t0
        await self.reader
        return dt


def _prepare() -> None:
    """Measure what an install gives: bytecode compiled (pip does this for a wheel)."""
    import compileall

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(str(ROOT / "acp_agent"), quiet=1)


def agent_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "acp_agent", *extra]


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------------- measures


async def bench_startup(
    runs: int, tmp: str, cmd: list[str] | None = None, prefix: str = ""
) -> dict[str, float]:
    init_ms, new_ms, rss = [], [], []
    for _ in range(runs):
        a = Agent(*(cmd or agent_cmd("--state-dir", tmp)))
        t0 = await a.start()
        await a.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        init_ms.append((time.perf_counter() - t0) * 1000)
        t1 = time.perf_counter()
        await a.request("session/new", {"cwd": tmp, "mcpServers": []})
        new_ms.append((time.perf_counter() - t1) * 1000)
        rss.append(_rss_mb(a.proc.pid))
        await a.close()
    return {
        f"{prefix}spawn_to_initialize_ms": median(init_ms),
        f"{prefix}session_new_ms": median(new_ms),
        f"{prefix}peak_rss_mb_idle": median(rss),
    }


async def _stream_once(a: Agent, sid: str, expect_chunks: int) -> tuple[float, float, float, int]:
    count = 0
    first: list[float] = []

    def on_update(line: bytes) -> None:
        nonlocal count
        if b"agent_message_chunk" in line:
            count += 1
            if not first:
                first.append(time.perf_counter())

    a.on_update = on_update
    cpu0 = _cpu_seconds(a.proc.pid)
    t0 = time.perf_counter()
    await a.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    dt = time.perf_counter() - t0
    cpu = _cpu_seconds(a.proc.pid) - cpu0
    return dt, cpu, (first[0] - t0) if first else float("nan"), count


async def bench_stream_offline(runs: int, tmp: str, chunks: int) -> dict[str, float]:
    script = Path(tmp) / "stream.json"
    script.write_text(json.dumps([[{"text": "w " * (2 * chunks)}]] * 3))
    rates, cpus, firsts = [], [], []
    for _ in range(runs):
        a = Agent(*agent_cmd("--state-dir", tmp), env={"ACP_AGENT_OFFLINE_SCRIPT": str(script)})
        await a.start()
        sid = await a.init_and_session(tmp)
        await _stream_once(a, sid, chunks)  # warm-up
        dt, cpu, first, n = await _stream_once(a, sid, chunks)
        rates.append(n / dt)
        cpus.append(cpu / n * 1e6)
        firsts.append(first * 1000)
        await a.close()
    return {
        "offline_chunks_per_s": median(rates),
        "offline_cpu_us_per_chunk": median(cpus),
        "offline_first_chunk_ms": median(firsts),
        "chunks": chunks,
    }


async def _spawn_fake_server(chunks: int, *flags: str) -> tuple[Any, int]:
    server = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes.llm_server", "--chunks", str(chunks), *flags),
        stdout=-1,
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert server.stdout
    return server, int((await server.stdout.readline()).split()[-1])


async def bench_stream_sdk(runs: int, tmp: str, chunks: int, vendor: str) -> dict[str, float]:
    """Through the real SDK (``vendor`` openai or anthropic) against the local fake server."""
    server, port = await _spawn_fake_server(chunks)
    rates, cpus, firsts, rss = [], [], [], []
    try:
        for _ in range(runs):
            model, url = (
                ("openai:gpt-4.1", f"http://127.0.0.1:{port}/v1")
                if vendor == "openai"
                else ("anthropic:claude-sonnet-4-5", f"http://127.0.0.1:{port}")
            )
            a = Agent(
                *agent_cmd("--state-dir", tmp, "--model", model, "--base-url", url),
                env={"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"},
            )
            await a.start()
            sid = await a.init_and_session(tmp)
            await _stream_once(a, sid, chunks)  # warm-up: the SDK import and connection
            dt, cpu, first, n = await _stream_once(a, sid, chunks)
            rates.append(n / dt)
            cpus.append(cpu / max(n, 1) * 1e6)
            firsts.append(first * 1000)
            rss.append(_rss_mb(a.proc.pid))
            await a.close()
    finally:
        server.kill()
        await server.wait()
    return {
        f"{vendor}_chunks_per_s": median(rates),
        f"{vendor}_cpu_us_per_chunk": median(cpus),
        f"{vendor}_first_chunk_ms": median(firsts),
        f"peak_rss_mb_with_{vendor}": median(rss),
    }


async def bench_cancel_and_exit(runs: int, tmp: str) -> dict[str, float]:
    script = Path(tmp) / "cancel.json"
    script.write_text(json.dumps([[{"text": "w " * 2_000_000}]] * (runs * 2)))
    cancel_ms, exit_ms = [], []
    for _ in range(runs):
        a = Agent(*agent_cmd("--state-dir", tmp), env={"ACP_AGENT_OFFLINE_SCRIPT": str(script)})
        await a.start()
        sid = await a.init_and_session(tmp)
        started = asyncio.Event()
        a.on_update = lambda line, ev=started: b"agent_message_chunk" in line and ev.set()
        fut = a.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        )
        await started.wait()
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        a.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        result = await fut
        cancel_ms.append((time.perf_counter() - t0) * 1000)
        assert result["result"]["stopReason"] == "cancelled", result
        # exit while another turn streams
        started.clear()
        a.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        await started.wait()
        exit_ms.append(await a.close() * 1000)
    return {
        "cancel_to_response_ms": median(cancel_ms),
        "exit_after_stdin_close_ms": median(exit_ms),
    }


async def bench_load(runs: int, tmp: str, turns: int = 1000) -> dict[str, float]:
    """``session/load`` of a 1,000-turn session (built with the store API): request ->
    response, after the whole replay streamed to the client."""
    from acp_agent.store import Store
    from tests.test_session_store import build_session

    state = os.path.join(tmp, "load-state")
    build_session(Store(state), "sess_bench_load", turns, cwd=tmp)
    times, updates = [], 0
    for _ in range(runs):
        a = Agent(*agent_cmd("--state-dir", state))
        await a.start()
        await a.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        count = 0

        def on_update(line: bytes) -> None:
            nonlocal count
            count += 1

        a.on_update = on_update
        t0 = time.perf_counter()
        result = await a.request(
            "session/load", {"sessionId": "sess_bench_load", "cwd": tmp, "mcpServers": []}
        )
        times.append((time.perf_counter() - t0) * 1000)
        assert "result" in result, result
        updates = count
        await a.close()
    return {"load_1000_turns_ms": median(times), "load_replayed_updates": updates}


def bench_encode(n: int = 200_000) -> dict[str, float]:
    """Agent CPU to build, encode and write one agent_message_chunk (to /dev/null)."""
    from acp_agent.protocol import types as t
    from acp_agent.rpc.connection import Connection
    from acp_agent.rpc.framing import FdWriter, LineReader

    async def run() -> float:
        devnull = open(os.devnull, "wb")  # noqa: SIM115
        conn = Connection(LineReader(), FdWriter(devnull))
        sid = "sess_0123456789abcdef01234567"
        t0 = time.process_time()
        for _ in range(n):
            await conn.notify(
                "session/update",
                t.SessionNotification(
                    session_id=sid,
                    update=t.AgentMessageChunk(
                        content=t.TextContent(text="hello world "), message_id="msg_1"
                    ),
                ),
            )
        return (time.process_time() - t0) / n * 1e6

    return {"encode_write_us_per_update": asyncio.run(run())}


def _sse_decoders() -> dict[str, Any]:
    """The decoders ``--only sse`` compares on the same SDK response: ``EventStream`` as
    shipped (httpx-sse, then msgspec), the hand-written SSE parser it replaced (issue 13)
    feeding the same msgspec decoding, and the SDK's own pydantic models (``parse()``)."""
    from acp_agent.providers._wire import EventStream

    class HandParsedStream(EventStream):
        async def _events(self) -> Any:
            data: list[str] = []
            async for line in self._response.iter_lines():
                if line.startswith("data:"):
                    data.append(line[6:] if line.startswith("data: ") else line[5:])
                    if len(data) == 1 and data[0].startswith("{") and data[0].endswith("}"):
                        event = self._decode(data.pop())  # one line, one event: decode now
                        if event is not None:
                            yield event
                    continue
                if line or not data:
                    continue  # comments, event names, ids
                event = self._decode("\n".join(data))
                data.clear()
                if event is not None:
                    yield event
            if data and (event := self._decode("\n".join(data))) is not None:
                yield event

    class SDKModelsStream(EventStream):
        async def _events(self) -> Any:
            async for event in await self._response.parse():
                yield event

    return {"httpx_sse": EventStream, "hand": HandParsedStream, "sdk": SDKModelsStream}


def _sse_target(vendor: str, url: str) -> tuple[Any, Any, Any, Any]:
    """A provider, its SDK's ``with_streaming_response.create``, its Struct and its check."""
    from acp_agent.providers import _anthropic, _openai, _wire

    if vendor == "openai":
        o = _openai.OpenAIProvider("gpt-4.1", api_key="bench", base_url=f"{url}/v1")
        create = o._ensure_client().chat.completions.with_streaming_response.create
        return o, create, _wire.Chunk, _wire.openai_event
    a = _anthropic.AnthropicProvider("claude-sonnet-4-5", api_key="bench", base_url=url)
    create = a._ensure_client().messages.with_streaming_response.create
    return a, create, _wire.AEvent, _wire.anthropic_event


async def bench_sse(runs: int, chunks: int) -> dict[str, Any]:
    """µs of this process's CPU (``time.process_time``) per chunk, from the request through
    the SDK to the last event decoded; medians over ``runs`` rounds (after a warm-up round)
    that run each decoder once, in turn first and last. ``minus_hand``: the median of the
    per-round differences. The fake server runs in its own process: its CPU is not counted."""
    from acp_agent.conversation import TextPart, UserMessage
    from acp_agent.providers.base import ModelRequest

    decoders = _sse_decoders()
    request = ModelRequest(system="", messages=[UserMessage([TextPart("go")])])
    sdk_runs = max(3, runs // 4)  # the SDK's models are slow: fewer rounds
    out: dict[str, Any] = {"sse_chunks": chunks, "sse_runs": runs, "sse_sdk_runs": sdk_runs}
    for framing, flags in (("body", ()), ("event", ("--per-event",))):
        server, port = await _spawn_fake_server(chunks, *flags)
        try:
            for vendor in ("openai", "anthropic"):
                provider, create, struct, check = _sse_target(vendor, f"http://127.0.0.1:{port}")
                params = provider.request_params(request)
                cpu: dict[str, list[float]] = {name: [] for name in decoders}
                events: set[int] = set()
                for round_ in range(runs + 1):  # round 0 warms up (imports, connection)
                    order = [d for d in decoders.items() if d[0] != "sdk" or round_ <= sdk_runs]
                    for name, decoder in order[:: 1 if round_ % 2 else -1]:  # alternate first
                        gc.collect()
                        t0 = time.process_time()
                        stream = await decoder(create(**params), struct, check).open()
                        n = 0
                        async for _ in stream:
                            n += 1
                        await stream.close()
                        if round_:
                            cpu[name].append((time.process_time() - t0) / chunks * 1e6)
                        events.add(n)
                await provider.aclose()
                key = f"sse_{vendor}_{framing}"
                out[f"{key}_events_decoded"] = "/".join(map(str, sorted(events)))
                for name, samples in cpu.items():
                    out[f"{key}_{name}_us_per_chunk"] = f"{median(samples):.2f}"
                diffs = [a - b for a, b in zip(cpu["httpx_sse"], cpu["hand"], strict=True)]
                out[f"{key}_httpx_sse_minus_hand_us"] = f"{median(diffs):+.2f}"
        finally:
            server.kill()
            await server.wait()
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "startup"):
            # interleave the baseline with ours so both see the same machine load
            for _ in range(2):
                ours = await bench_startup(args.runs // 2, tmp)
                base = await bench_startup(
                    args.runs // 2,
                    tmp,
                    [sys.executable, str(ROOT / "tools/minimal_agent.py")],
                    prefix="baseline_minimal_msgspec_",
                )
            out.update(ours)
            out.update(base)
        if args.only in (None, "stream"):
            out.update(await bench_stream_offline(max(3, args.runs // 4), tmp, args.chunks))
            for vendor in ("openai", "anthropic"):
                out.update(await bench_stream_sdk(max(3, args.runs // 4), tmp, args.chunks, vendor))
        if args.only in (None, "load"):
            out.update(await bench_load(max(3, args.runs // 4), tmp))
        if args.only in (None, "cancel", "exit"):
            out.update(await bench_cancel_and_exit(max(5, args.runs // 2), tmp))
        if args.only in (None, "sse"):
            out.update(await bench_sse(args.runs, args.chunks))
        if args.only in (None, "cost"):
            from bench_cost import bench_cost

            out.update(await bench_cost(tmp, Agent, agent_cmd))
        if args.only in (None, "context"):
            from bench_context import bench_context

            out.update(await bench_context(tmp, Agent, agent_cmd))
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--chunks", type=int, default=20_000)
    measures = ["startup", "stream", "cancel", "exit", "encode", "load", "sse", "cost", "context"]
    p.add_argument("--only", choices=measures)
    args = p.parse_args()
    _prepare()
    results: dict[str, Any] = {}
    if args.only in (None, "encode"):
        results.update(bench_encode())
    if args.only != "encode":
        results.update(asyncio.run(main_async(args)))
    width = max(map(len, results))
    for key, value in results.items():
        shown = f"{value:,.{_decimals(value)}f}" if isinstance(value, float) else str(value)
        sys.stdout.write(f"{key:<{width}}  {shown}\n")


def _decimals(value: float) -> int:
    """Enough decimals for small amounts (dollars), one for the rest."""
    return 4 if 0 < abs(value) < 10 and value != round(value, 1) else 1


if __name__ == "__main__":
    main()
