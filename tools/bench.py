"""Benchmarks of the agent as editors see it: a fresh ``acp-agent`` process per sample.

    python tools/bench.py                  # everything, medians over --runs spawns
    python tools/bench.py --only startup   # one measure (see --help for the list)
    python tools/bench.py --before REV     # also the agent at revision REV (startup, list, load)

Measures (medians; baselines interleaved with what they are the baseline of):
  startup     spawn -> ``initialize`` reply, the first and the second ``session/new``, RSS,
              of the agent installed
              from a wheel built from this checkout, against tools/minimal_agent.py (the
              cheapest Python ACP agent) on the same interpreter; ``--before``: the
              earlier revision's wheel too
  stream      CPU per text delta and deltas/s through the real SDKs against
              tools/bench_server.py, one HTTP frame per SSE event (written and drained one
              by one, as the vendors send) and the whole reply in one frame, against
              tools/minimal_relay.py (the floor: httpx2 -> SSE lines -> msgspec -> ACP
              line); and the offline model (bench_stream.py)
  first       time to the first chunk of a process's first prompt, sent 3 s after
              ``initialize`` (against a warm prompt) and at once (against ``import <sdk>``)
  coalesce    ACP_AGENT_COALESCE_CHUNKS off and on: updates per reply, CPU, deltas/s
  concurrent  50 sessions of one process streaming at once, against one session alone
  prompt      agent CPU per prompt at 5 and at 1,000 turns of history, and the minimal
              relay's (bench_prompt.py)
  warm        the first chunk of a prompt right after another, against the minimal relay's
  many        short prompts to 50 and 200 sessions at once, against one session: CPU per prompt
  list        ``session/list`` over 5,000 and 100,000 stored sessions (bench_store.py)
  load        ``session/load`` of a 10,000-turn session: time and peak RSS
  cancel      ``session/cancel`` -> ``cancelled`` response while streaming
  exit        stdin closed -> process gone (during a running turn)
  encode      in-process agent CPU to encode and write one ``session/update``
  sse         in-process CPU per chunk to decode a streamed reply through the real SDKs'
              ``with_streaming_response``: providers/_wire.py (the shipped splitter), httpx-sse
              (what it replaced, issue 17) and the SDKs' pydantic models, both framings
  context     the fixed overhead of every request in tokens; a 60-call session against a
              40 k-token window: peak request, summaries, stubs (bench_context.py)
  cost        input cost of a scripted 10-turn coding session with prompt caching on and off,
              per provider, against the fake server billing as the vendors do (bench_cost.py)
  sandbox     a command through run_command's local route inside the sandbox
              (workspace-write, bubblewrap) against the same command outside it: `true` and
              a short `python -c` (bench_sandbox.py)
  search      tokens and time of a grep and a glob over a git repository with a 5,000-file
              venv/ and build/ in .gitignore: now (ripgrep) and before issue 25 (bench_tools.py)
  output      tokens of a 100,000-line command output, now and before (bench_tools.py)
  cache       six interleaved gpt-5 sessions on the Responses API with and without
              prompt_cache_key: input cost as OpenAI bills it (bench_tools.py)
  serve       `acp-agent serve` over WebSocket and Streamable HTTP against stdio: round trip
              and CPU of a small request, CPU per streamed chunk; 100 connections streaming
              at once against one (bench_serve.py)

The run ends with the issue-17 figures as ratios to their baselines, and the machine they
came from (with its load average: other work on it moves every figure).
Nothing here asserts: the figures go into issue notes and the README. Loopback only.
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

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> None:
        self.args = args
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.cwd = cwd  # ``python -m`` puts the working directory first on sys.path
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
            cwd=self.cwd,
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
    runs: int,
    tmp: str,
    cmd: list[str] | None = None,
    prefix: str = "",
    env: dict[str, str] | None = None,
    samples: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Medians of ``runs`` starts; with ``samples``, of those and the ones it holds from
    earlier rounds (it is extended)."""
    held = samples if samples is not None else {}
    init_ms, new_ms, second_ms, rss = (held.setdefault(k, []) for k in ("i", "n", "s", "r"))
    for _ in range(runs):
        a = Agent(*(cmd or agent_cmd("--state-dir", tmp)), env=env, cwd=tmp)
        t0 = await a.start()
        answers = [await a.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})]
        init_ms.append((time.perf_counter() - t0) * 1000)
        t1 = time.perf_counter()
        answers.append(await a.request("session/new", {"cwd": tmp, "mcpServers": []}))
        new_ms.append((time.perf_counter() - t1) * 1000)
        t2 = time.perf_counter()
        answers.append(await a.request("session/new", {"cwd": tmp, "mcpServers": []}))
        second_ms.append((time.perf_counter() - t2) * 1000)
        for answer in answers:  # an error is quick, and measures nothing
            if "result" not in answer:
                raise SystemExit(f"{a.args[0]}: {answer}")
        rss.append(_rss_mb(a.proc.pid))
        await a.close()
    return {
        f"{prefix}spawn_to_initialize_ms": median(init_ms),
        f"{prefix}session_new_ms": median(new_ms),
        f"{prefix}second_session_new_ms": median(second_ms),
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
    shipped (the body's bytes split, msgspec on each payload), httpx-sse feeding the same
    msgspec decoding (what issue 17 replaced; a dev dependency now), and the SDK's own
    pydantic models (``parse()``)."""
    from acp_agent.providers._wire import EventStream

    class HttpxSseStream(EventStream):  # type: ignore[type-arg]
        async def _events(self) -> Any:
            from httpx_sse import EventSource

            async for sse in EventSource(self._response.http_response).aiter_sse():
                if sse.data and (event := self._decode(sse.data)) is not None:
                    yield event

    class SDKModelsStream(EventStream):  # type: ignore[type-arg]
        async def _events(self) -> Any:
            async for event in await self._response.parse():
                yield event

    return {"bytes": EventStream, "httpx_sse": HttpxSseStream, "sdk": SDKModelsStream}


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
    that run each decoder once, in turn first and last. ``bytes_minus_httpx_sse``: the median of the
    per-round differences. The server runs in its own process: its CPU is not counted."""
    from acp_agent.conversation import TextPart, UserMessage
    from acp_agent.providers.base import ModelRequest

    decoders = _sse_decoders()
    request = ModelRequest(system="", messages=[UserMessage([TextPart("go")])])
    sdk_runs = max(3, runs // 4)  # the SDK's models are slow: fewer rounds
    out: dict[str, Any] = {"sse_chunks": chunks, "sse_runs": runs, "sse_sdk_runs": sdk_runs}
    from bench_stream import spawn_server

    for framing in ("body", "event"):
        server, port = await spawn_server(chunks, framing)
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
                diffs = [a - b for a, b in zip(cpu["bytes"], cpu["httpx_sse"], strict=True)]
                out[f"{key}_bytes_minus_httpx_sse_us"] = f"{median(diffs):+.2f}"
        finally:
            server.kill()
            await server.wait()
    return out


def _export(rev: str, tmp: str) -> str:
    """An export of git revision ``rev`` (once per run)."""
    import subprocess

    root = os.path.join(tmp, "before")
    if not os.path.isdir(root):
        os.makedirs(root)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True,
                                 check=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    return root


def _before(rev: str | None, tmp: str) -> Any:
    """A launcher of the agent at git revision ``rev`` (an export of it), or ``None``."""
    if not rev:
        return None
    root = _export(rev, tmp)

    def launch(*extra: str) -> Agent:  # cwd: ``-m`` puts it first on sys.path
        return Agent(sys.executable, "-m", "acp_agent", *extra, env={"PYTHONPATH": root},
                     cwd=root)  # fmt: skip

    return launch


def _before_agent(rev: str | None, tmp: str) -> Any:
    """``(vendor, port) ->`` the agent at git revision ``rev`` against the benchmark
    server, or ``None``."""
    if not rev:
        return None
    import bench_stream

    root = _export(rev, tmp)

    def make(vendor: str, port: int) -> Agent:
        model, path = bench_stream.VENDORS[vendor]
        return Agent(sys.executable, "-m", "acp_agent", "--state-dir", tmp, "--model", model,
                     "--base-url", f"http://127.0.0.1:{port}{path}",
                     env={**bench_stream.KEYS, "PYTHONPATH": root}, cwd=root)  # fmt: skip

    return make


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import bench_prompt
    import bench_store
    import bench_stream
    from bench_summary import install_wheel

    out: dict[str, Any] = {}
    only = args.only
    with tempfile.TemporaryDirectory() as tmp:
        b = bench_stream.Bench(Agent, agent_cmd, median, tmp)
        if only in (None, "startup"):
            venv = install_wheel(tmp)
            env = {"PYTHONPATH": ""}  # the installed package, not this checkout
            installed = [str(venv / "bin/acp-agent"), "--state-dir", tmp]
            minimal = [str(venv / "bin/python"), str(ROOT / "tools/minimal_agent.py")]
            earlier: list[str] | None = None
            if args.before:  # the same, installed from the earlier revision's wheel
                old = install_wheel(tmp, Path(_export(args.before, tmp)), "before-wheel")
                earlier = [str(old / "bin/acp-agent"), "--state-dir", tmp]
            held: dict[str, dict[str, list[float]]] = {"ours": {}, "base": {}, "before": {}}
            for _ in range(args.runs):  # interleaved spawn by spawn: all see the same load
                ours = await bench_startup(1, tmp, installed, "installed_", env, held["ours"])
                base = await bench_startup(
                    1, tmp, minimal, "baseline_minimal_msgspec_", env, held["base"]
                )
                if earlier is not None:
                    out.update(
                        await bench_startup(1, tmp, earlier, "before_", env, held["before"])
                    )
            out.update(ours)
            out.update(base)
        if only in (None, "stream"):
            out.update(await bench_stream_offline(max(3, args.runs // 4), tmp, args.chunks))
            out.update(await bench_stream.bench_stream(b, max(3, args.runs // 4), args.chunks))
        if only in (None, "first"):
            out.update(await bench_stream.bench_first_chunk(b, max(3, args.runs // 4)))
        if only in (None, "coalesce"):
            out.update(await bench_stream.bench_coalesce(b, max(3, args.runs // 4), args.chunks))
        if only in (None, "concurrent"):
            out.update(await bench_stream.bench_concurrent(b, max(3, args.runs // 4)))
        if only in (None, "prompt"):
            before_agent = _before_agent(args.before, tmp)
            out.update(await bench_prompt.bench_per_prompt(b, max(5, args.runs),
                                                           before=before_agent))  # fmt: skip
        if only in (None, "warm"):
            out.update(await bench_prompt.bench_warm_first_chunk(b, max(5, args.runs)))
        if only in (None, "many"):
            out.update(await bench_prompt.bench_many_sessions(b, max(3, args.runs // 4)))
        before = _before(args.before, tmp)
        if only in (None, "list"):
            launch = lambda *extra: Agent(*agent_cmd(*extra))  # noqa: E731
            out.update(await bench_store.bench_list(3, tmp, launch, before, median))
        if only in (None, "load"):
            launch = lambda *extra: Agent(*agent_cmd(*extra))  # noqa: E731
            out.update(
                await bench_store.bench_load(3, tmp, launch, before, median, _rss_mb, 10_000)
            )
        if only in (None, "cancel", "exit"):
            out.update(await bench_cancel_and_exit(max(5, args.runs // 2), tmp))
        if only in (None, "sse"):
            out.update(await bench_sse(args.runs, args.chunks))
        if only in (None, "cost"):
            from bench_cost import bench_cost

            out.update(await bench_cost(tmp, Agent, agent_cmd))
        if only in (None, "context"):
            from bench_context import bench_context

            out.update(await bench_context(tmp, Agent, agent_cmd))
        if only in (None, "sandbox"):
            from bench_sandbox import bench_sandbox

            out.update(await bench_sandbox(args.runs, tmp, median))
        if only in (None, "search"):
            from bench_tools import bench_search

            out.update(bench_search(tmp, _export))
        if only in (None, "output"):
            from bench_tools import bench_output

            out.update(bench_output(tmp, _export))
        if only in (None, "cache"):
            from bench_tools import bench_cache

            out.update(await bench_cache(tmp, Agent, agent_cmd))
        if only in (None, "serve"):
            from bench_serve import bench_serve

            out.update(await bench_serve(Agent, agent_cmd, median, tmp, max(3, args.runs // 4),
                                         args.chunks // 4))
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--chunks", type=int, default=20_000)
    measures = ["startup", "stream", "first", "coalesce", "concurrent", "prompt", "warm", "many",
                "list", "load", "cancel", "exit", "encode", "sse", "cost", "context", "sandbox",
                "search", "output", "cache", "serve"]  # fmt: skip
    p.add_argument("--only", choices=measures)
    p.add_argument("--before", help="git revision to compare start-up, prompt, list and load with")
    args = p.parse_args()
    _prepare()
    from bench_summary import machine, summary

    results: dict[str, Any] = {f"{k}_at_start": v for k, v in machine().items()}
    if args.only in (None, "encode"):
        results.update(bench_encode())
    if args.only != "encode":
        results.update(asyncio.run(main_async(args)))
    results["load_average_at_end"] = machine()["load_average_1_5_15"]
    width = max(map(len, results))
    for key, value in results.items():
        shown = f"{value:,.{_decimals(value)}f}" if isinstance(value, float) else str(value)
        sys.stdout.write(f"{key:<{width}}  {shown}\n")
    rows = summary(results)
    if rows:
        sys.stdout.write("\nissue 17: figure | baseline | ratio (goal)\n")
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)))
            sys.stdout.write(f"  {r[3]}\n")


def _decimals(value: float) -> int:
    """Enough decimals for small amounts (dollars), one for the rest."""
    return 4 if 0 < abs(value) < 10 and value != round(value, 1) else 1


if __name__ == "__main__":
    main()
