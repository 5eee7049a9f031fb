"""``tools/bench.py --only context``: what every request carries, and how a long session
fits its window.

* **Fixed overhead**: the built-in system prompt (with a typical environment block) and
  every built-in tool's schema, in tokens: estimated at ~4 characters a token over the
  JSON the APIs receive, the way ``tests.fakes.api_rules`` counts.
* **A 60-call session**: one prompt, 60 ``read_file`` calls of ~1,500 tokens each
  (~90 k tokens read: more than twice the window), through the real agent and SDK against the
  fake server enforcing a 40 k-token window (a request over it is refused with the
  vendor's error). Printed per provider: the stop reason, the peak request against the
  window, the requests made, the summaries asked for, the stubs written.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

WINDOW = 40_000
CALLS = 60
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}


def overhead() -> dict[str, float]:
    from acp_agent.engine.instructions import builtin
    from acp_agent.tools import builtin_tools

    specs = builtin_tools().specs()
    tools = json.dumps([{"name": s.name, "description": s.description,
                         "input_schema": s.parameters} for s in specs])  # fmt: skip
    environment = 600  # the environment block: OS, date, roots, git, model, mode
    return {
        "overhead: system prompt (tokens)": (len(builtin()) + environment) / 4,
        "overhead: tool schemas (tokens)": len(tools) / 4,
        "overhead: total (tokens)": (len(builtin()) + environment + len(tools)) / 4,
    }


async def _session(
    provider: str, tmp: str, agent: Callable[..., Any], cmd: Callable[..., list[str]]
) -> dict[str, float]:
    from tests.fakes.api_rules import count_tokens
    from tests.fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage

    work = Path(tempfile.mkdtemp(dir=tmp))
    (work / "ws").mkdir()
    for i in range(CALLS):
        (work / "ws" / f"f{i}.txt").write_text(
            "".join(f"line {k} of file {i}: {'data ' * 8}\n" for k in range(120))
        )
    config = work / "config.toml"
    model = MODELS[provider]
    config.write_text(f'[limits]\nmax-turn-requests = 200\n[model-overrides."{model}"]\n'
                      f"context-window = {WINDOW}\nmax-output-tokens = 2000\n")  # fmt: skip
    summaries = 0

    def respond(req: Any) -> Any:
        nonlocal summaries
        if "answer with the summary only" in json.dumps(req.body.get("messages", [])[-1:]):
            summaries += 1
            return Reply([Text("## Summary\n- Reading the files in order."), Usage(100, 20),
                          Finish("stop")])  # fmt: skip
        return None

    async with FakeLLMServer() as server:
        server.window, server.responder = WINDOW, respond
        server.enqueue(*[
            Reply([ToolCall(f"c{i}", "read_file", json.dumps({"path": f"f{i}.txt"})),
                   Usage(1000, 10), Finish("tool_calls")]) for i in range(CALLS)
        ], Reply([Text("done"), Usage(1000, 5), Finish("stop")]))  # fmt: skip
        url = server.url if provider == "anthropic" else server.openai_url
        args = ("--state-dir", str(work), "--config", str(config), "--mode", "bypass",
                "--model", f"{provider}:{model}", "--base-url", url)  # fmt: skip
        a = agent(*cmd(*args), env={"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"})
        await a.start()
        sid = await a.init_and_session(str(work / "ws"))
        text = [{"type": "text", "text": "Read f0.txt to f59.txt, one at a time."}]
        reply = await a.request("session/prompt", {"sessionId": sid, "prompt": text})
        result = reply.get("result", {})
        await a.close()
        sizes = [count_tokens(r.body) for r in server.requests]
        stubs = sum(json.dumps(r.body).count("removed to make room") for r in server.requests[-1:])
    shutil.rmtree(work, ignore_errors=True)
    name = f"60 calls, {provider}"
    return {
        f"{name}: ended end_turn (1 = yes)": float(result.get("stopReason") == "end_turn"),
        f"{name}: read in all (tokens)": CALLS * 1_500,
        f"{name}: peak request (tokens)": max(sizes),
        f"{name}: window (tokens)": WINDOW,
        f"{name}: requests": len(sizes),
        f"{name}: summaries": summaries,
        f"{name}: stubs in the last request": stubs,
    }


async def bench_context(
    tmp: str, agent: Callable[..., Any], cmd: Callable[..., list[str]]
) -> dict[str, float]:
    out = overhead()
    for provider in ("anthropic", "openai"):
        out.update(await _session(provider, tmp, agent, cmd))
    return out
