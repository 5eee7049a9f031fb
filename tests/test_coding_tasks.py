"""Scripted coding tasks on both providers' fakes (issue 11), checked by their outcome in
a real repository: the files on disk, the checks the project runs, and what the model
was fed back. The fakes enforce the APIs' rules on every request."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage
from .harness import AgentProcess
from .schema_check import SchemaChecker

MODELS = {"openai": "openai:gpt-4.1", "anthropic": "anthropic:claude-sonnet-4-5"}


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    d = tmp_path / "repo"
    (d / "shop").mkdir(parents=True)
    (d / "shop" / "__init__.py").write_text("")
    (d / "shop" / "calc.py").write_text(
        "def add(a, b):\n    return a - b\n\n\ndef total_price(items):\n"
        "    return sum(price for _, price in items)\n"
    )
    (d / "shop" / "cart.py").write_text(
        "from shop.calc import total_price\n\n\nclass Cart:\n    def __init__(self):\n"
        "        self.items = []\n\n    def total(self):\n        return total_price(self.items)\n"
    )
    (d / "shop" / "config.py").write_text(
        "\n".join(f"SETTING_{i} = {i}" for i in range(11)) + '\nTAX_RATE = "0.2"\n'
    )
    (d / "test_calc.py").write_text(
        "import unittest\nfrom shop.calc import add\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    subprocess.run(["git", "init", "-q", str(d)], check=True)
    return d


def call(call_id: str, name: str, **arguments: Any) -> Reply:
    return Reply([ToolCall(call_id, name, json.dumps(arguments)), Usage(500, 20),
                  Finish("tool_calls")])


def answer(text: str) -> Reply:
    return Reply([Text(text), Usage(500, 20), Finish("stop")])


def fed_back(server: FakeLLMServer, call_id: str) -> str:
    """The result of ``call_id`` as the model received it (either vendor's shape)."""
    for req in server.requests:
        for m in req.body.get("messages", []):
            if m.get("role") == "tool" and m.get("tool_call_id") == call_id:
                return str(m["content"])
            for block in m.get("content") if isinstance(m.get("content"), list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                    return json.dumps(block.get("content"))
    raise AssertionError(f"{call_id} was never fed back")


async def run_task(checker: SchemaChecker, state_dir: str, server: FakeLLMServer, vendor: str,
                   repo: Path, prompt: str, *replies: Reply) -> dict[str, Any]:
    server.enqueue(*replies)
    url = server.openai_url if vendor == "openai" else server.url
    key = "OPENAI_API_KEY" if vendor == "openai" else "ANTHROPIC_API_KEY"
    agent = AgentProcess(checker, "--state-dir", state_dir, "--model", MODELS[vendor],
                         "--base-url", url, "--mode", "accept-edits", env={key: "k"})
    async with agent:
        await agent.initialize()
        sid = await agent.new_session(str(repo))
        result: dict[str, Any] = await agent.prompt(sid, prompt)
        asked = [r["params"]["toolCall"]["title"] for r in agent.client_requests]
        assert all(title.startswith("Run `") for title in asked)  # edits ran, commands asked
    return result


def unittests_pass(repo: Path) -> bool:
    run = subprocess.run(["python3", "-m", "unittest", "-q"], cwd=repo, capture_output=True)
    return run.returncode == 0


VENDORS = pytest.mark.parametrize("vendor", ["openai", "anthropic"])


@VENDORS
async def test_fix_a_failing_test(checker: SchemaChecker, state_dir: str, server: FakeLLMServer,
                                  vendor: str, repo: Path) -> None:
    result = await run_task(
        checker, state_dir, server, vendor, repo, "test_calc fails; fix it",
        call("c1", "run_command", command="python3 -m unittest -q"),
        call("c2", "read_file", path="shop/calc.py"),
        call("c3", "edit_file", path="shop/calc.py", old_string="return a - b",
             new_string="return a + b"),
        call("c4", "run_command", command="python3 -m unittest -q"),
        answer("Fixed `add` in shop/calc.py:2 (it subtracted); the test passes."),
    )
    assert result["stopReason"] == "end_turn"
    assert "AssertionError" in fed_back(server, "c1") and "Exit code: 1" in fed_back(server, "c1")
    assert "return a - b" in fed_back(server, "c2")
    assert "Exit code: 0" in fed_back(server, "c4")
    assert unittests_pass(repo)


@VENDORS
async def test_rename_a_symbol_across_files(checker: SchemaChecker, state_dir: str,
                                            server: FakeLLMServer, vendor: str,
                                            repo: Path) -> None:
    check = "python3 -c 'from shop.cart import Cart; print(Cart().total())'"
    result = await run_task(
        checker, state_dir, server, vendor, repo, "rename total_price to cart_total",
        call("c1", "grep", pattern=r"\btotal_price\b"),
        call("c2", "edit_file", path="shop/calc.py", old_string="def total_price(",
             new_string="def cart_total("),
        call("c3", "edit_file", path="shop/cart.py", old_string="total_price",
             new_string="cart_total", replace_all=True),
        call("c4", "run_command", command=check),
        answer("Renamed in shop/calc.py and shop/cart.py."),
    )
    assert result["stopReason"] == "end_turn"
    found = fed_back(server, "c1")
    assert "shop/calc.py:5" in found and "shop/cart.py:1" in found and "shop/cart.py:9" in found
    code = (repo / "shop" / "calc.py").read_text() + (repo / "shop" / "cart.py").read_text()
    assert "total_price" not in code and code.count("cart_total") == 3
    assert "Exit code: 0" in fed_back(server, "c4")


@VENDORS
async def test_add_a_function_with_its_test(checker: SchemaChecker, state_dir: str,
                                            server: FakeLLMServer, vendor: str,
                                            repo: Path) -> None:
    test = ("import unittest\nfrom shop.calc import discount\n\n\nclass D(unittest.TestCase):\n"
            "    def test_discount(self):\n        self.assertEqual(discount(100, 0.25), 75)\n")
    result = await run_task(
        checker, state_dir, server, vendor, repo, "add discount(price, rate) with a test",
        call("c1", "read_file", path="shop/calc.py"),
        call("c2", "edit_file", path="shop/calc.py", old_string="def add(a, b):\n    return a - b",
             new_string="def add(a, b):\n    return a + b\n\n\ndef discount(price, rate):\n"
                        "    return price * (1 - rate)"),
        call("c3", "write_file", path="test_discount.py", content=test),
        call("c4", "run_command", command="python3 -m unittest -q"),
        answer("Added `discount` to shop/calc.py with test_discount.py; all tests pass."),
    )
    assert result["stopReason"] == "end_turn"
    assert "Ran 2 tests" in fed_back(server, "c4") and "Exit code: 0" in fed_back(server, "c4")
    assert unittests_pass(repo) and (repo / "test_discount.py").read_text() == test


@VENDORS
async def test_investigate_with_grep(checker: SchemaChecker, state_dir: str,
                                     server: FakeLLMServer, vendor: str,
                                     repo: Path) -> None:
    result = await run_task(
        checker, state_dir, server, vendor, repo, "where is the tax rate set, and why a string?",
        call("c1", "grep", pattern="TAX", glob="*.py"),
        call("c2", "read_file", path="shop/config.py", offset=10, limit=3),
        answer('`TAX_RATE` is set in shop/config.py:12 as the string "0.2".'),
    )
    assert result["stopReason"] == "end_turn"
    assert "shop/config.py:12: TAX_RATE" in fed_back(server, "c1")
    page = fed_back(server, "c2")
    assert "TAX_RATE" in page and "0.2" in page
    assert "SETTING_0 " not in page  # only the lines asked for


def test_the_repository_fails_before_the_tasks(repo: Path) -> None:
    """The repository is a real one: the check the tasks make pass fails before them."""
    assert not unittests_pass(repo)
