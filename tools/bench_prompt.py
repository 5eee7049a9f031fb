"""What a prompt costs besides its chunks, for tools/bench.py (issue 30): the agent against
the benchmark model server (tools/bench_server.py, a reply of ``DELTAS`` text deltas, one
SSE event per HTTP frame), through the real SDKs, OpenAI's Chat Completions.

  prompt   agent CPU per prompt (every thread, request to response) on a session of 5
           turns and on one of 1,000 (two processes, built by prompting, then prompted in
           turn), and the minimal relay's (tools/minimal_relay.py: httpx2 -> SSE -> ACP
           lines, no SDK, no history, no log: the floor of the HTTP path) in the same turn
  warm     the first chunk of a prompt sent right after another, against the minimal
           relay's, the two prompted in turn
  many     short prompts to 50 and to 200 sessions of one process at once, against the
           same number sent to one session one after another: CPU per prompt

CPU is the time the process's threads ran (``/proc/<pid>/task/*/schedstat``, in ns).
"""

from __future__ import annotations

from typing import Any

from bench_stream import Bench, cpu_seconds, prompt, spawn_server, stop

#: Text deltas per reply: a short answer.
DELTAS = 10


async def _session(b: Bench, a: Any) -> str:
    reply = await a.request("session/new", {"cwd": b.tmp, "mcpServers": []})
    return str(reply["result"]["sessionId"])


async def _cpu_of_prompt(a: Any, sid: str) -> float:
    """µs of the agent's CPU for one prompt, request to response."""
    cpu0 = cpu_seconds(a.proc.pid)
    reply = await a.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    )
    assert "result" in reply, reply
    return (cpu_seconds(a.proc.pid) - cpu0) * 1e6


async def bench_per_prompt(
    b: Bench, runs: int, long: int = 1000, short: int = 5, before: Any = None
) -> dict[str, Any]:
    """Per-prompt CPU at ``short`` and ``long`` turns, and the relay's, interleaved:
    ``runs`` rounds of one prompt each (the short process prompts a fresh ``short``-turn
    session each round, so it stays short). ``before(vendor, port)``: an agent of an
    earlier revision, measured the same way in the same rounds."""
    server, port = await spawn_server(DELTAS, "event")
    makers = {"": lambda: b.agent("openai", port)}
    if before is not None:
        makers["before_"] = lambda: before("openai", port)
    # name -> (process, the session of each round)
    measured: dict[str, tuple[Any, list[str]]] = {}
    try:
        for prefix, make in makers.items():
            agent_long, agent_short = make(), make()
            long_sid = await b.started(agent_long)
            for _ in range(long):  # the long session: built by prompting, as a user would
                await prompt(agent_long, [long_sid], DELTAS)
            await b.started(agent_short)
            shorts = [await _session(b, agent_short) for _ in range(runs)]
            for _ in range(short):
                await prompt(agent_short, shorts, DELTAS)
            measured[f"{prefix}short"] = (agent_short, shorts)
            measured[f"{prefix}long"] = (agent_long, [long_sid] * runs)
        relay = b.relay("openai", port)
        relay_sid = await b.started(relay)
        await prompt(relay, [relay_sid], DELTAS)
        measured["relay"] = (relay, [relay_sid] * runs)
        cpu: dict[str, list[float]] = {name: [] for name in measured}
        for run in range(runs):
            for name in list(measured)[:: 1 if run % 2 else -1]:
                a, sids = measured[name]
                cpu[name].append(await _cpu_of_prompt(a, sids[run]))
        for a, _ in measured.values():
            await a.close()
    finally:
        await stop(server)
    out: dict[str, Any] = {"prompt_deltas_per_reply": DELTAS, "prompt_turns": f"{short}/{long}"}
    for name, samples in cpu.items():
        out[f"prompt_cpu_us_{name}"] = b.median(samples)
    for prefix in makers:
        out[f"prompt_cpu_{prefix}long_over_short"] = b.median(
            [x / y for x, y in zip(cpu[f"{prefix}long"], cpu[f"{prefix}short"], strict=True)]
        )
    out["prompt_cpu_short_over_relay"] = b.median(
        [x / y for x, y in zip(cpu["short"], cpu["relay"], strict=True)]
    )
    return out


async def bench_warm_first_chunk(b: Bench, runs: int) -> dict[str, Any]:
    """The first chunk of a warm prompt (right after another), agent against relay."""
    server, port = await spawn_server(DELTAS, "event")
    try:
        pair = {"agent": b.agent("openai", port), "relay": b.relay("openai", port)}
        sids = {name: await b.started(a) for name, a in pair.items()}
        firsts: dict[str, list[float]] = {name: [] for name in pair}
        for run in range(runs + 3):  # the first three warm up
            for name in list(pair)[:: 1 if run % 2 else -1]:
                first = (await prompt(pair[name], [sids[name]], DELTAS))[2] * 1000
                if run >= 3:
                    firsts[name].append(first)
        for a in pair.values():
            await a.close()
    finally:
        await stop(server)
    return {
        "warm_first_chunk_ms": b.median(firsts["agent"]),
        "warm_first_chunk_relay_ms": b.median(firsts["relay"]),
        "warm_first_chunk_over_relay": b.median(
            [x / y for x, y in zip(firsts["agent"], firsts["relay"], strict=True)]
        ),
    }


async def bench_many_sessions(b: Bench, runs: int, counts: tuple[int, ...] = (50, 200)) -> dict[
        str, Any]:  # fmt: skip
    """CPU per prompt: ``n`` sessions prompted at once, against ``n`` prompts to one
    session one after another (the same process, in turn)."""
    out: dict[str, Any] = {}
    server, port = await spawn_server(DELTAS, "event")
    try:
        for n in counts:
            a = b.agent("openai", port)
            one = await b.started(a)
            many = [one] + [await _session(b, a) for _ in range(n - 1)]
            await prompt(a, many, DELTAS)  # every session's first turn
            await prompt(a, [one], DELTAS)
            alone: list[float] = []
            together: list[float] = []
            for run in range(runs):
                for group in ("one", "many") if run % 2 else ("many", "one"):
                    cpu0 = cpu_seconds(a.proc.pid)
                    if group == "many":
                        await prompt(a, many, DELTAS)
                    else:
                        for _ in range(n):
                            await prompt(a, [one], DELTAS)
                    used = (cpu_seconds(a.proc.pid) - cpu0) / n * 1e6
                    (together if group == "many" else alone).append(used)
            await a.close()
            out[f"many_{n}_sessions_cpu_us_per_prompt"] = b.median(together)
            out[f"many_{n}_one_session_cpu_us_per_prompt"] = b.median(alone)
            out[f"many_{n}_over_one"] = b.median(
                [x / y for x, y in zip(together, alone, strict=True)]
            )
    finally:
        await stop(server)
    return out
