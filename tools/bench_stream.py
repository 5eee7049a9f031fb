"""Streaming, first prompts and many sessions, for tools/bench.py: the agent against the
benchmark model server (tools/bench_server.py, one SSE event per HTTP frame, each written
and drained, as the vendors send; or the whole reply in one frame), through the real SDKs.

  stream      per provider and framing: the agent's CPU per text delta and deltas/s, with
              the minimal relay (tools/minimal_relay.py: httpx2 -> SSE lines -> msgspec ->
              ACP line) as the floor, the two processes prompted in turn
  coalesce    ACP_AGENT_COALESCE_CHUNKS off and on, in turn: updates sent, CPU, deltas/s
  first       time to the first chunk: a prompt 3 s after ``initialize`` (as a person
              would) against the median warm prompt of the same process sent right after
              another, and against a warm prompt sent after the same 3 s pause (a machine
              that sat idle takes longer to answer, whoever answers) (and the same for
              the minimal relay, which warms nothing up: its first request makes the
              connection and builds httpx2's machinery); a prompt sent at once against
              ``import <sdk>`` alone in a fresh interpreter, and against the SDK alone
              streaming one request in a fresh interpreter (import, client, request:
              the floor of any agent built on the SDK)
  concurrent  50 sessions of one process streaming at once against one session alone,
              in turn: CPU per delta and deltas/s

CPU is the time the process's threads ran (``/proc/<pid>/task/*/schedstat``, in ns).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENDORS = {"openai": ("openai:gpt-4.1", "/v1"), "anthropic": ("anthropic:claude-sonnet-4-5", "")}
KEYS = {"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"}


async def spawn_server(chunks: int, framing: str = "event") -> tuple[Any, int]:
    server = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "tools/bench_server.py"), "--chunks", str(chunks),
        "--framing", framing, stdout=-1,
    )  # fmt: skip
    assert server.stdout
    return server, int((await server.stdout.readline()).strip())


async def stop(server: Any) -> None:
    server.kill()
    await server.wait()


def cpu_seconds(pid: int) -> float:
    """The CPU time of ``pid``'s threads, in ns steps (``/proc/<pid>/task/*/schedstat``)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that just ended
    return total / 1e9


class Bench:
    """The pieces of tools/bench.py these measures use."""

    def __init__(self, Agent: Any, agent_cmd: Any, median: Any, tmp: str) -> None:
        self.Agent, self.agent_cmd, self.median, self.tmp = Agent, agent_cmd, median, tmp

    def agent(self, vendor: str, port: int, env: dict[str, str] | None = None) -> Any:
        model, path = VENDORS[vendor]
        url = f"http://127.0.0.1:{port}{path}"
        args = self.agent_cmd("--state-dir", self.tmp, "--model", model, "--base-url", url)
        return self.Agent(*args, env={**KEYS, **(env or {})})

    def relay(self, vendor: str, port: int) -> Any:
        url = f"http://127.0.0.1:{port}{VENDORS[vendor][1]}"
        return self.Agent(sys.executable, str(ROOT / "tools/minimal_relay.py"), vendor, url)

    async def started(self, a: Any) -> str:
        await a.start()
        return str(await a.init_and_session(self.tmp))


async def prompt(a: Any, sids: list[str], deltas: int) -> tuple[float, float, float, int]:
    """Prompt ``sids`` at once: (wall s, CPU s, first chunk s, updates), ``deltas`` each."""
    updates = 0
    first: list[float] = []

    def on_update(line: bytes) -> None:
        nonlocal updates
        if b"agent_message_chunk" in line:
            updates += 1
            if not first:
                first.append(time.perf_counter())

    a.on_update = on_update
    cpu0 = cpu_seconds(a.proc.pid)
    t0 = time.perf_counter()
    text = [{"type": "text", "text": "go"}]
    replies = await asyncio.gather(
        *(a.request("session/prompt", {"sessionId": sid, "prompt": text}) for sid in sids)
    )
    wall = time.perf_counter() - t0
    assert all("result" in r for r in replies), replies
    return wall, cpu_seconds(a.proc.pid) - cpu0, (first[0] - t0) if first else float("nan"), updates


async def bench_stream(b: Bench, runs: int, chunks: int) -> dict[str, Any]:
    out: dict[str, Any] = {"stream_deltas_per_reply": chunks}
    for framing in ("event", "body"):
        server, port = await spawn_server(chunks, framing)
        try:
            for vendor in VENDORS:
                pair = {"agent": b.agent(vendor, port), "relay": b.relay(vendor, port)}
                sids = {name: await b.started(a) for name, a in pair.items()}
                cpu: dict[str, list[float]] = {name: [] for name in pair}
                rate: dict[str, list[float]] = {name: [] for name in pair}
                for run in range(runs + 1):  # run 0 warms both up
                    for name in list(pair)[:: 1 if run % 2 else -1]:
                        wall, used, _, _ = await prompt(pair[name], [sids[name]], chunks)
                        if run:
                            cpu[name].append(used / chunks * 1e6)
                            rate[name].append(chunks / wall)
                for a in pair.values():
                    await a.close()
                key = f"stream_{vendor}_{framing}"
                for name in pair:
                    out[f"{key}_{name}_us_per_chunk"] = b.median(cpu[name])
                    out[f"{key}_{name}_chunks_per_s"] = b.median(rate[name])
                ratios = [x / y for x, y in zip(cpu["agent"], cpu["relay"], strict=True)]
                out[f"{key}_agent_over_relay"] = b.median(ratios)
        finally:
            await stop(server)
    return out


async def bench_coalesce(b: Bench, runs: int, chunks: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    server, port = await spawn_server(chunks, "event")
    try:
        for vendor in VENDORS:
            pair = {
                "off": b.agent(vendor, port),
                "on": b.agent(vendor, port, {"ACP_AGENT_COALESCE_CHUNKS": "1"}),
            }
            sids = {name: await b.started(a) for name, a in pair.items()}
            seen: dict[str, list[tuple[float, float, int]]] = {name: [] for name in pair}
            for run in range(runs + 1):
                for name in list(pair)[:: 1 if run % 2 else -1]:
                    wall, used, _, updates = await prompt(pair[name], [sids[name]], chunks)
                    if run:
                        seen[name].append((used / chunks * 1e6, chunks / wall, updates))
            for a in pair.values():
                await a.close()
            for name, samples in seen.items():
                key = f"coalesce_{vendor}_{name}"
                out[f"{key}_us_per_chunk"] = b.median([s[0] for s in samples])
                out[f"{key}_chunks_per_s"] = b.median([s[1] for s in samples])
                out[f"{key}_updates_per_reply"] = b.median([s[2] for s in samples])
    finally:
        await stop(server)
    return out


async def import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=-1)
    out, _ = await proc.communicate()
    return float(out)


#: The SDK's own floor for a prompt sent at once: a fresh interpreter imports the SDK,
#: builds a client and streams one request to its first text delta (argv: base URL).
SDK_FIRST = {
    "openai": """
import asyncio, sys, time
t = time.perf_counter()
import openai
async def main():
    client = openai.AsyncOpenAI(api_key="bench", base_url=sys.argv[1], max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "go"}], stream=True)
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            print(time.perf_counter() - t)
            break
    await stream.close()
asyncio.run(main())
""",
    "anthropic": """
import asyncio, sys, time
t = time.perf_counter()
import anthropic
async def main():
    client = anthropic.AsyncAnthropic(api_key="bench", base_url=sys.argv[1], max_retries=0)
    stream = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, stream=True,
        messages=[{"role": "user", "content": "go"}])
    async for event in stream:
        if event.type == "content_block_delta":
            print(time.perf_counter() - t)
            break
    await stream.close()
asyncio.run(main())
""",
}


async def sdk_first_seconds(vendor: str, port: int) -> float:
    url = f"http://127.0.0.1:{port}{VENDORS[vendor][1]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SDK_FIRST[vendor], url, stdout=-1
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"the {vendor} SDK alone did not stream (exit {proc.returncode})")
    return float(out)


async def bench_first_chunk(b: Bench, runs: int, pause: float = 3.0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    server, port = await spawn_server(50, "event")
    try:
        for vendor in VENDORS:
            later, warm, at_once, imports, relay_later, relay_warm = [], [], [], [], [], []
            paused: list[float] = []
            sdk_first: list[float] = []
            for _ in range(runs):
                r = b.relay(vendor, port)
                sid = await b.started(r)
                await asyncio.sleep(pause)
                relay_later.append((await prompt(r, [sid], 50))[2] * 1000)
                relay_warm.append(
                    b.median([(await prompt(r, [sid], 50))[2] * 1000 for _ in range(3)])
                )
                await r.close()
                a = b.agent(vendor, port)
                sid = await b.started(a)
                await asyncio.sleep(pause)
                later.append((await prompt(a, [sid], 50))[2] * 1000)
                await asyncio.sleep(pause)  # a warm prompt after the same pause
                paused.append((await prompt(a, [sid], 50))[2] * 1000)
                warm.append(b.median([(await prompt(a, [sid], 50))[2] * 1000 for _ in range(3)]))
                await a.close()
                a = b.agent(vendor, port)
                sid = await b.started(a)
                at_once.append((await prompt(a, [sid], 50))[2] * 1000)
                await a.close()
                imports.append(await import_seconds(vendor) * 1000)
                sdk_first.append(await sdk_first_seconds(vendor, port) * 1000)
            key = f"first_chunk_{vendor}"
            out[f"{key}_warm_ms"] = b.median(warm)
            out[f"{key}_after_{pause:g}s_ms"] = b.median(later)
            out[f"{key}_after_{pause:g}s_over_warm"] = b.median(
                [x / y for x, y in zip(later, warm, strict=True)]
            )
            out[f"{key}_warm_after_{pause:g}s_ms"] = b.median(paused)
            out[f"{key}_after_{pause:g}s_over_warm_after_{pause:g}s"] = b.median(
                [x / y for x, y in zip(later, paused, strict=True)]
            )
            out[f"{key}_relay_warm_ms"] = b.median(relay_warm)
            out[f"{key}_relay_after_{pause:g}s_ms"] = b.median(relay_later)
            out[f"{key}_at_once_ms"] = b.median(at_once)
            out[f"{key}_import_{vendor}_ms"] = b.median(imports)
            out[f"{key}_at_once_over_import"] = b.median(
                [x / y for x, y in zip(at_once, imports, strict=True)]
            )
            out[f"{key}_sdk_alone_ms"] = b.median(sdk_first)
            out[f"{key}_at_once_over_sdk_alone"] = b.median(
                [x / y for x, y in zip(at_once, sdk_first, strict=True)]
            )
    finally:
        await stop(server)
    return out


async def bench_concurrent(
    b: Bench, runs: int, chunks: int = 2000, sessions: int = 50
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    server, port = await spawn_server(chunks, "event")
    try:
        a = b.agent("openai", port)
        sids = [await b.started(a)]
        sids += [
            str(
                (await a.request("session/new", {"cwd": b.tmp, "mcpServers": []}))["result"][
                    "sessionId"
                ]
            )
            for _ in range(sessions - 1)
        ]
        await prompt(a, sids, chunks)  # every session's first turn
        one: list[tuple[float, float]] = []
        many: list[tuple[float, float]] = []
        for run in range(runs):
            for group in [sids[:1], sids] if run % 2 else [sids, sids[:1]]:
                wall, used, _, updates = await prompt(a, group, chunks)
                deltas = chunks * len(group)
                assert updates == deltas, (updates, deltas)
                (one if len(group) == 1 else many).append((used / deltas * 1e6, deltas / wall))
        await a.close()
        out["concurrent_sessions"] = sessions
        for name, samples in (("one", one), (f"{sessions}", many)):
            out[f"concurrent_{name}_us_per_chunk"] = b.median([s[0] for s in samples])
            out[f"concurrent_{name}_chunks_per_s"] = b.median([s[1] for s in samples])
        out[f"concurrent_{sessions}_over_one"] = b.median(
            [m[0] / o[0] for m, o in zip(many, one, strict=True)]
        )
    finally:
        await stop(server)
    return out
