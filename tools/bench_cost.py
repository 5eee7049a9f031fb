"""``tools/bench.py --only cost``: what prompt caching saves on a coding session.

A scripted 10-turn session (reads of 100-300-line modules, edits, a test run with a
pytest-sized report, a directory listing, a grep, a new file) runs through the real agent
(a subprocess, the real SDK) against the fake model server billing as the vendors do
(:mod:`tests.fakes.llm_billing`), once with prompt caching (the default) and once with
``[limits] prompt-cache = false``, each in a fresh copy of the same workspace. Printed per
provider: the input cost as billed with caching, as billed without, and the same prompts
at the full input price (no cache at all), with the ratio; and the session's cost as the
agent reported it in ``usage_update`` (input and output). Prices: the model table.

OpenAI caches prefixes by itself, whatever the agent does (the switch only withholds
``prompt_cache_key``, which goes to api.openai.com alone): its "no cache" figure is the
same prompts at the full input price.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}


# --------------------------------------------------------------------------- the workspace


def _module(name: str, functions: int) -> str:
    lines = [f'"""{name}: inventory records and the operations on them."""', "",
             "from __future__ import annotations", "", "from dataclasses import dataclass", "",
             "", "@dataclass", "class Item:", "    sku: str", "    price: float",
             "    quantity: int", ""]  # fmt: skip
    for i in range(functions):
        lines += [
            "",
            f"def select_{i}(items: list[Item], threshold: float = {i}.5) -> list[Item]:",
            f'    """The items above the threshold with at least {i % 5} in stock."""',
            "    result = []",
            "    for item in items:",
            f"        if item.price > threshold and item.quantity >= {i % 5}:",
            "            result.append(item)  # TODO: stream instead" if i % 7 == 3 else
            "            result.append(item)",
            "    return result",
        ]  # fmt: skip
    return "\n".join(lines) + "\n"


def _report(failed: bool) -> str:
    tests = [f"tests/test_store.py::test_select_{i} PASSED" for i in range(60)]
    if failed:
        tests[17] = "tests/test_store.py::test_select_17 FAILED"
    tail = (["", "FAILED tests/test_store.py::test_select_17 - assert 3 == 4",
             "1 failed, 59 passed in 0.42s"] if failed else ["", "60 passed in 0.40s"])  # fmt: skip
    return "\n".join(["============ test session starts ============",
                      "platform linux -- Python 3.12.3, pytest-8.3.2", "collected 60 items", "",
                      *tests, *tail])  # fmt: skip


def make_workspace(root: Path) -> None:
    src = root / "src" / "inventory"
    src.mkdir(parents=True)
    (root / "tests").mkdir()
    (src / "__init__.py").write_text('"""Inventory."""\n')
    (src / "models.py").write_text(_module("models", 20))
    (src / "store.py").write_text(_module("store", 36))
    (src / "utils.py").write_text(_module("utils", 12))
    (src / "config.py").write_text(
        '"""Settings."""\n\nimport tomllib\n\n\ndef load_config(path: str) -> dict:\n'
        '    with open(path, "rb") as fh:\n        return tomllib.load(fh)\n'
    )
    (root / "tests" / "test_store.py").write_text(_module("test_store", 15))
    (root / "README.md").write_text("# Inventory\n\n" + "A small inventory service. " * 40 + "\n")
    for name, failed in (("run_tests.sh", True), ("run_tests_fixed.sh", False)):
        (root / name).write_text(f"cat <<'EOF'\n{_report(failed)}\nEOF\n")


# --------------------------------------------------------------------------- the session


def _call(n: int, name: str, **arguments: Any) -> Any:
    from tests.fakes.llm_server import ToolCall

    return ToolCall(f"call_{n:02d}", name, json.dumps(arguments))


def session_script() -> list[tuple[str, list[Any]]]:
    """(prompt, the model's replies to it); each reply ends a model request."""
    from tests.fakes.llm_server import Finish, Reply, Text, Usage

    def reply(text: str, *calls: Any) -> Any:
        steps = [Text(text), *calls, Usage(0, 40 + len(text) // 4)]
        return Reply([*steps, Finish("tool_calls" if calls else "stop")])

    old = "            result.append(item)  # TODO: stream instead"
    return [
        ("Where is the configuration loaded?", [
            reply("Let me search.", _call(1, "grep", pattern="load_config")),
            reply("Reading it.", _call(2, "read_file", path="src/inventory/config.py")),
            reply("`load_config` in src/inventory/config.py reads a TOML file with tomllib.")]),
        ("Explain the store module.", [
            reply("Reading the module.", _call(3, "read_file", path="src/inventory/store.py")),
            reply("store.py defines Item and 36 selection helpers; each filters by price "
                  "and stock. " * 3)]),
        ("Run the tests.", [
            reply("Running them.", _call(4, "run_command", command="sh run_tests.sh")),
            reply("One failure: test_select_17 expects 4 items and gets 3.")]),
        ("Look at the models and the test.", [
            reply("Reading both.", _call(5, "read_file", path="src/inventory/models.py"),
                  _call(6, "read_file", path="tests/test_store.py")),
            reply("The threshold of select_17 excludes the boundary; the test includes it.")]),
        ("Fix it.", [
            reply("Editing.", _call(7, "edit_file", path="src/inventory/store.py",
                                    old_string="item.price > threshold and item.quantity >= 2",
                                    new_string="item.price >= threshold and item.quantity >= 2",
                                    replace_all=True)),
            reply("Done: the comparison now includes the threshold.")]),
        ("Run the tests again.", [
            reply("Running.", _call(8, "run_command", command="sh run_tests_fixed.sh")),
            reply("All 60 tests pass.")]),
        ("What does the project contain?", [
            reply("Listing.", _call(9, "list_directory", path="."),
                  _call(10, "glob", pattern="**/*.py")),
            reply("Four modules under src/inventory, one test file, a README and two scripts.")]),
        ("Find the TODOs and address the one in utils.", [
            reply("Searching.", _call(11, "grep", pattern="TODO")),
            reply("Reading utils.", _call(12, "read_file", path="src/inventory/utils.py")),
            reply("Editing.", _call(13, "edit_file", path="src/inventory/utils.py",
                                    old_string=old, new_string="            result.append(item)",
                                    replace_all=True)),
            reply("The TODOs in utils.py are resolved; store.py and models.py keep theirs.")]),
        ("Add a test for the config loader.", [
            reply("Writing it.", _call(14, "write_file", path="tests/test_config.py",
                                       content=_module("test_config", 6))),
            reply("Running.", _call(15, "run_command", command="sh run_tests_fixed.sh")),
            reply("Added tests/test_config.py; the suite passes.")]),
        ("Summarise what changed.", [
            reply("Changes:\n- store.py: thresholds are inclusive (fixes test_select_17)\n"
                  "- utils.py: TODOs resolved\n- tests/test_config.py: new\n" * 2)]),
    ]  # fmt: skip


# --------------------------------------------------------------------------- the run


async def _run(
    provider: str, cache: bool, tmp: str, agent: Callable[..., Any], cmd: Callable[..., list[str]]
) -> tuple[list[Any], float | None]:
    """One session (``agent``/``cmd``: bench.py's client and command line); the fake's
    bills and the last cost the agent reported."""
    from tests.fakes.llm_server import FakeLLMServer

    work = tempfile.mkdtemp(dir=tmp)
    workspace = Path(work) / "ws"
    make_workspace(workspace)
    config = Path(work) / "config.toml"
    config.write_text(f"[limits]\nprompt-cache = {'true' if cache else 'false'}\n")
    script = session_script()
    async with FakeLLMServer(billing=True, record=False) as server:
        for _, replies in script:
            server.enqueue(*replies)
        url = server.url if provider == "anthropic" else server.openai_url
        args = ("--state-dir", work, "--config", str(config), "--mode", "bypass",
                "--model", f"{provider}:{MODELS[provider]}", "--base-url", url)  # fmt: skip
        a = agent(*cmd(*args), env={"OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench"})
        costs: list[float] = []
        failed: list[str] = []

        def on_update(line: bytes) -> None:
            update = json.loads(line)["params"]["update"]
            if update.get("sessionUpdate") == "usage_update" and "cost" in update:
                costs.append(update["cost"]["amount"])
            elif update.get("status") == "failed":  # the script no longer fits the tools
                failed.append(update["toolCallId"])

        a.on_update = on_update
        await a.start()
        sid = await a.init_and_session(str(workspace))
        for prompt, _ in script:
            text = [{"type": "text", "text": prompt}]
            await a.request("session/prompt", {"sessionId": sid, "prompt": text})
        await a.close()
        bills = list(server.billing.bills) if server.billing else []
    shutil.rmtree(work, ignore_errors=True)
    if failed:
        print(f"warning: {provider}: failed tool calls {failed}", file=sys.stderr)
    return bills, costs[-1] if costs else None


def _input_usd(provider: str, bills: list[Any], *, list_price: bool = False) -> float:
    from acp_agent.providers.models import model_info

    info = model_info(provider, MODELS[provider])
    full = info.input_price or 0.0
    read = full if list_price or info.cached_input_price is None else info.cached_input_price
    write = full if list_price or info.cache_write_price is None else info.cache_write_price
    return sum(b.fresh * full + b.cached * read + b.cache_write * write for b in bills) / 1e6


async def bench_cost(
    tmp: str, agent: Callable[..., Any], cmd: Callable[..., list[str]]
) -> dict[str, Any]:
    os.environ.pop("ACP_AGENT_MODEL", None)
    out: dict[str, Any] = {}
    for provider in ("anthropic", "openai"):
        on, reported_on = await _run(provider, True, tmp, agent, cmd)
        off, reported_off = await _run(provider, False, tmp, agent, cmd)
        cached = _input_usd(provider, on)
        none = _input_usd(provider, off, list_price=True)
        p = f"{provider}_{MODELS[provider]}"
        out[f"{p}_requests"] = len(on)
        out[f"{p}_prompt_tokens"] = sum(b.input for b in on)
        out[f"{p}_cache_read_tokens"] = sum(b.cached for b in on)
        out[f"{p}_cache_write_tokens"] = sum(b.cache_write for b in on)
        out[f"{p}_input_usd_cached"] = round(cached, 4)
        out[f"{p}_input_usd_prompt_cache_off"] = round(_input_usd(provider, off), 4)
        out[f"{p}_input_usd_no_cache"] = round(none, 4)
        out[f"{p}_cached_over_no_cache_pct"] = round(100 * cached / none, 1) if none else "n/a"
        out[f"{p}_reported_session_usd_cached"] = reported_on
        out[f"{p}_reported_session_usd_prompt_cache_off"] = reported_off
    return out
