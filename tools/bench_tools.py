"""``tools/bench.py --only search|output|cache``: what the model's everyday tools cost it.

search  tokens (``tools.budget.estimate_tokens``) and bytes a ``grep "def add"`` and a
        ``glob **/*.py`` return over a realistic tree: a git repository with ``src/``
        (120 modules, one ``def add``), a 5,000-file ``venv/`` and a ``build/`` copy of the
        sources, both in ``.gitignore``; now (ripgrep) and before (revision ``BASE``: a
        Python walk skipping ``.venv``, ``node_modules``, ``.git``), with each search's time
        (median of 5)
output  tokens and bytes of ``seq 1 100000`` through run_command, now and before
cache   input cost of six interleaved gpt-5 sessions (five prompts each, one file read
        per prompt) through the agent and the real SDK, on OpenAI's Responses API as the
        agent sees it (the fake server behind ``HTTP_PROXY``, billing as OpenAI does:
        ``tests.fakes.llm_billing``), with ``prompt_cache_key`` (the default) and without
        (``[limits] prompt-cache = false``)

"Before" runs the exported revision's tools in a subprocess of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The revision before issue 25 (the tools the figures compare with).
BASE = "e68b5da"

_RUN_TOOLS = r"""
import asyncio, json, sys, time
from acp_agent.tools.base import ToolContext
from acp_agent.tools.search import Glob, Grep
from acp_agent.tools.command import RunCommand

class Client:
    capabilities = None
    def allows(self, method): return False

async def emit(update): pass

async def main(cwd, calls):
    out = []
    for name, args in calls:
        tool = {"grep": Grep, "glob": Glob, "run_command": RunCommand}[name]()
        ctx = ToolContext(session_id="s", cwd=cwd, roots=[cwd], client=Client(),
                          tool_call_id="c", emit=emit)
        times = []
        for _ in range(5 if name != "run_command" else 1):
            start = time.perf_counter()
            result = await tool.run(tool.parse(args), ctx)
            times.append(time.perf_counter() - start)
        out.append({"text": result.text, "seconds": sorted(times)[len(times) // 2]})
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
"""

CALLS = [("grep", {"pattern": "def add"}), ("glob", {"pattern": "**/*.py"})]
SEQ = [("run_command", {"command": "seq 1 100000"})]


def make_tree(root: Path) -> None:
    """A project with a virtual environment and a build directory git ignores."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("venv/\nbuild/\n__pycache__/\n")
    for i in range(120):
        body = "".join(f"def f{i}_{j}(x):\n    return x + {j}\n\n" for j in range(12))
        if i == 7:
            body += "def add(a, b):\n    return a + b\n"
        path = root / "src" / f"pkg{i % 6}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        build = root / "build" / "lib" / path.relative_to(root / "src")
        build.parent.mkdir(parents=True, exist_ok=True)
        build.write_text(body)
    site = root / "venv" / "lib" / "python3.11" / "site-packages"
    for i in range(5_000):
        body = f"# vendored module {i}\n\ndef helper_{i}(value):\n    return value\n"
        if i % 17 == 0:
            body += "\n\ndef add(self, item):\n    self.items.append(item)\n"
        path = site / f"lib{i % 50}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def _run(python_path: str, cwd: str, calls: list[Any]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": python_path}  # and run there: ``-c`` puts "" first
    done = subprocess.run([sys.executable, "-c", _RUN_TOOLS, cwd, json.dumps(calls)],
                          capture_output=True, text=True, env=env, check=True,
                          cwd=python_path)  # fmt: skip
    return list(json.loads(done.stdout))


def _figures(prefix: str, results: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    from acp_agent.tools.budget import estimate_tokens

    out: dict[str, Any] = {}
    for name, result in zip(names, results, strict=True):
        text = result["text"]
        out[f"{prefix}_{name}_tokens"] = estimate_tokens(text)
        out[f"{prefix}_{name}_bytes"] = len(text.encode())
        out[f"{prefix}_{name}_lines"] = text.count("\n") + 1
        if name != "run_command":
            out[f"{prefix}_{name}_ms"] = round(result["seconds"] * 1000, 1)
    return out


def bench_search(tmp: str, export: Callable[[str, str], str]) -> dict[str, Any]:
    tree = Path(tmp) / "tree"
    make_tree(tree)
    before = export(BASE, tmp)
    out: dict[str, Any] = {}
    out.update(_figures("search_now", _run(str(ROOT), str(tree), CALLS), ["grep", "glob"]))
    out.update(_figures("search_before", _run(before, str(tree), CALLS), ["grep", "glob"]))
    return out


def bench_output(tmp: str, export: Callable[[str, str], str]) -> dict[str, Any]:
    before = export(BASE, tmp)
    out: dict[str, Any] = {}
    out.update(_figures("output_now", _run(str(ROOT), tmp, SEQ), ["run_command"]))
    out.update(_figures("output_before", _run(before, tmp, SEQ), ["run_command"]))
    return out


# ---------------------------------------------------------------------- prompt_cache_key

SESSIONS, PROMPTS = 6, 5


async def _cache_run(cache: bool, tmp: str, agent: Callable[..., Any],
                     cmd: Callable[..., list[str]]) -> list[Any]:  # fmt: skip
    from tests.fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage

    work = tempfile.mkdtemp(dir=tmp)
    ws = Path(work) / "ws"
    ws.mkdir()
    for i in range(PROMPTS):
        (ws / f"notes{i}.md").write_text(f"# Notes {i}\n" + "A line of project notes.\n" * 120)
    config = Path(work) / "config.toml"
    config.write_text(f"[limits]\nprompt-cache = {'true' if cache else 'false'}\n")
    async with FakeLLMServer(billing=True, record=False) as server:
        for p in range(PROMPTS):
            for s in range(SESSIONS):  # the prompts go round the sessions, in this order
                read = json.dumps({"path": f"notes{p}.md"})
                server.enqueue(
                    Reply([ToolCall(f"c{s}_{p}", "read_file", read), Usage(0, 30),
                           Finish("tool_calls")]),
                    Reply([Text(f"Notes {p} say: project notes."), Usage(0, 20),
                           Finish("stop")]),
                )  # fmt: skip
        args = ("--state-dir", work, "--config", str(config), "--mode", "bypass",
                "--model", "openai:gpt-5", "--base-url", "http://api.openai.com/v1")  # fmt: skip
        a = agent(*cmd(*args), env={"OPENAI_API_KEY": "bench", "HTTP_PROXY": server.url,
                                    "http_proxy": server.url, "NO_PROXY": "", "no_proxy": ""})
        await a.start()
        sids = [await a.init_and_session(str(ws))]
        for _ in range(SESSIONS - 1):
            new = await a.request("session/new", {"cwd": str(ws), "mcpServers": []})
            sids.append(str(new["result"]["sessionId"]))
        for p in range(PROMPTS):
            for sid in sids:
                text = [{"type": "text", "text": f"What do notes{p}.md say?"}]
                await a.request("session/prompt", {"sessionId": sid, "prompt": text})
        await a.close()
        return list(server.billing.bills) if server.billing else []


async def bench_cache(tmp: str, agent: Callable[..., Any],
                      cmd: Callable[..., list[str]]) -> dict[str, Any]:  # fmt: skip
    from acp_agent.providers.models import model_info

    info = model_info("openai", "gpt-5")
    assert info.input_price is not None and info.cached_input_price is not None
    out: dict[str, Any] = {}
    for cache, label in ((True, "with_key"), (False, "without_key")):
        bills = await _cache_run(cache, tmp, agent, cmd)
        usd = sum(b.fresh * info.input_price + b.cached * info.cached_input_price
                  for b in bills) / 1e6  # fmt: skip
        out[f"cache_gpt5_{label}_requests"] = len(bills)
        out[f"cache_gpt5_{label}_prompt_tokens"] = sum(b.input for b in bills)
        out[f"cache_gpt5_{label}_cached_tokens"] = sum(b.cached for b in bills)
        out[f"cache_gpt5_{label}_input_usd"] = round(usd, 4)
    full = sum(b.input for b in bills) * info.input_price / 1e6
    out["cache_gpt5_no_cache_input_usd"] = round(full, 4)
    return out

