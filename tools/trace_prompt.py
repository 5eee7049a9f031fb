"""Where one ``session/prompt`` goes through the package: the agent runs in this process
(the offline model, memory pipes, a client that allows everything), and a profiler hook
notes each call into a module of ours while the prompt runs (a coroutine resumed after
an ``await`` is not a new call) with the module of ours that made it. A call *goes up*
when the callee's layer is above the caller's (ARCHITECTURE.md's order). From the
repository root:

    python tools/trace_prompt.py              # this checkout
    python tools/trace_prompt.py --path DIR   # another checkout or export (e.g. git archive)

A callback a layer was handed (a retry announcement, a subagent's turn factory) still
counts as a climb when it runs: the count shows how often control goes back up, whatever
the reason. Nothing here is asserted; the figures go into notes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

#: Layers, top first (ARCHITECTURE.md); a module of the earlier flat layout is placed by
#: the package it moved to.
ORDER = ["edge", "human", "handlers", "engine", "sessions", "mcp", "tools", "providers",
         "leaves", "rpc", "protocol"]  # fmt: skip
FLAT = {
    **dict.fromkeys(("agent", "lifecycle", "catalog", "prompting", "options", "commands",
                     "auth", "endpoints", "runtime"), "handlers"),
    **dict.fromkeys(("turn", "toolcall", "streamargs", "context", "compaction",
                     "instructions", "subagents", "childstream", "permissions", "childenv",
                     "gitstate", "projectfiles"), "engine"),
    **dict.fromkeys(("session", "store", "sessionlog", "diskwriter", "sessionindex",
                     "records", "replay", "transcript"), "sessions"),
}  # fmt: skip


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "leaves"
    top = parts[1]
    if top in ("cli", "server", "login", "__main__"):
        return "edge"
    if top in ORDER:
        return top
    return FLAT.get(top, "leaves")


async def prompt_once(workspace: str, state: str) -> list[tuple[str, str]]:
    from acp_agent.client import ClientProxy
    from acp_agent.config import from_mapping
    from acp_agent.rpc.connection import Connection
    from acp_agent.rpc.framing import LineReader, MemoryPipe

    try:
        from acp_agent.handlers.agent import Agent
    except ImportError:  # the flat layout
        from acp_agent.agent import Agent  # type: ignore[no-redef]

    to_agent, to_client = LineReader(), LineReader()
    connection = Connection(to_agent, MemoryPipe(to_client))
    config = from_mapping({"model": "offline", "state-dir": state})
    agent = Agent(config, ClientProxy(connection))
    connection.routes.update(agent.routes())
    serving = asyncio.create_task(connection.serve())
    ids = iter(range(1, 1_000))
    seen: list[tuple[str, str]] = []

    async def request(method: str, params: dict[str, Any]) -> Any:
        my_id = next(ids)
        to_agent.feed(json.dumps({"jsonrpc": "2.0", "id": my_id, "method": method,
                                  "params": params}).encode() + b"\n")  # fmt: skip
        while True:
            line = await to_client.readline()
            assert isinstance(line, bytes)
            msg = json.loads(line)
            if msg.get("id") == my_id and "method" not in msg:
                return msg.get("result")
            if msg.get("method") == "session/request_permission":
                option = msg["params"]["options"][0]["optionId"]
                to_agent.feed(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                    "outcome": {"outcome": "selected", "optionId": option}}}).encode() + b"\n")

    await request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = await request("session/new", {"cwd": workspace, "mcpServers": []})
    sid = session["sessionId"]
    await request("session/prompt", {"sessionId": sid, "prompt": [
        {"type": "text", "text": "warm up"}]})  # fmt: skip

    started: set[Any] = set()  # frames already entered: a coroutine resumed is no new call

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame not in started:
            started.add(frame)
            name = frame.f_globals.get("__name__", "")
            if name.startswith("acp_agent"):
                caller = frame.f_back
                while caller is not None and not caller.f_globals.get("__name__", "").startswith(
                    "acp_agent"
                ):
                    caller = caller.f_back
                seen.append((caller.f_globals["__name__"] if caller else "", name))

    sys.setprofile(hook)
    try:
        await request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "read notes.txt"}]})  # fmt: skip
    finally:
        sys.setprofile(None)
    to_agent.feed_eof()
    await serving
    await agent.shutdown()
    return seen


def summarise(calls: list[tuple[str, str]]) -> dict[str, Any]:
    """Calls from one module into another, and those among them that go up a layer
    (the callee's layer above the caller's)."""
    across = [(a, b) for a, b in calls if a and a != b]
    up = [(a, b) for a, b in across if ORDER.index(layer(b)) < ORDER.index(layer(a))]
    return {
        "calls": len(calls),
        "modules": len({b for _, b in calls}),
        "calls_across_modules": len(across),
        "calls_up_a_layer": len(up),
        "up_by_pair": dict(Counter(f"{layer(a)} -> {layer(b)}" for a, b in up)),
        "up_into": dict(Counter(b for _, b in up).most_common(8)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", help="the checkout whose acp_agent to trace (default: this one)")
    args = p.parse_args()
    root = Path(args.path or Path(__file__).resolve().parent.parent)
    sys.path.insert(0, str(root))
    with tempfile.TemporaryDirectory() as tmp:
        workspace = os.path.join(tmp, "ws")
        os.makedirs(workspace)
        Path(workspace, "notes.txt").write_text("hello\n")
        calls = asyncio.run(prompt_once(workspace, os.path.join(tmp, "state")))
    print(json.dumps(summarise(calls), indent=1))


if __name__ == "__main__":
    main()
