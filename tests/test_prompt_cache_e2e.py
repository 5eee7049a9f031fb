"""Prompt caching end to end: the agent subprocess, through the real SDKs, against the fake
server billing as the vendors do. The session's cost in ``usage_update`` must be what the
vendor bills: fresh input, cache reads and cache writes each at the model's own price."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent.providers.models import ModelInfo, model_info

from .fakes.llm_billing import Bill
from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall, Usage
from .harness import AgentProcess
from .schema_check import SchemaChecker

OUTPUT = 7  # output tokens of every scripted reply


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer(billing=True) as s:
        yield s


def script(server: FakeLLMServer, finish_tools: str, finish_stop: str) -> list[str]:
    """Three prompts: a file read, a plain answer, a directory listing."""
    read = json.dumps({"path": "hello.txt"})
    server.enqueue(
        Reply([Text("Reading. "), ToolCall("call_1", "read_file", read), Usage(0, OUTPUT),
               Finish(finish_tools)]),
        Reply([Text("It says hello world."), Usage(0, OUTPUT), Finish(finish_stop)]),
        Reply([Text("Nothing else to add."), Usage(0, OUTPUT), Finish(finish_stop)]),
        Reply([ToolCall("call_2", "list_directory", "{}"), Usage(0, OUTPUT),
               Finish(finish_tools)]),
        Reply([Text("Just hello.txt."), Usage(0, OUTPUT), Finish(finish_stop)]),
    )  # fmt: skip
    return ["what is in hello.txt?", "anything else?", "which files are there?"]


def billed(info: ModelInfo, bills: list[Bill]) -> float:
    """USD as the vendor bills ``bills`` (each reply had OUTPUT output tokens)."""
    assert info.input_price is not None and info.output_price is not None
    read = info.cached_input_price if info.cached_input_price is not None else info.input_price
    write = info.cache_write_price if info.cache_write_price is not None else info.input_price
    total = sum(b.fresh * info.input_price + b.cached * read + b.cache_write * write
                + OUTPUT * info.output_price for b in bills)  # fmt: skip
    return total / 1e6


async def run_session(
    checker: SchemaChecker, state_dir: str, workspace: str, model: str, url: str,
    prompts: list[str], *extra: str,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """The prompt results and the last usage_update."""
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    args = ("--state-dir", state_dir, "--model", model, "--base-url", url, "--mode", "bypass")
    async with AgentProcess(checker, *args, *extra, env=env) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        results = [await agent.prompt(sid, text) for text in prompts]
        return results, agent.updates_of(sid, "usage_update")[-1]


def totals(results: list[dict[str, Any]], key: str) -> int:
    return sum(int(r["usage"].get(key, 0)) for r in results)


async def test_anthropic_session_reads_each_prefix_and_reports_the_billed_cost(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    prompts = script(server, "tool_calls", "stop")
    results, usage = await run_session(checker, state_dir, workspace,
                                       "anthropic:claude-sonnet-4-5", server.url, prompts)
    assert server.billing is not None
    bills = server.billing.bills
    assert len(bills) == 5
    # the first request writes its whole prompt; each later one reads all of the previous
    # request's prompt and writes only what is new: nothing is billed at the full price
    assert bills[0].cached == 0 and bills[0].cache_write == bills[0].input
    for before, now in itertools.pairwise(bills):
        assert now.cached == before.input and now.cache_write == now.input - before.input
    assert all(b.fresh == 0 for b in bills)
    info = model_info("anthropic", "claude-sonnet-4-5")
    assert usage["cost"] == {"amount": pytest.approx(billed(info, bills), abs=1e-6),
                             "currency": "USD"}  # fmt: skip
    assert totals(results, "cachedReadTokens") == sum(b.cached for b in bills)
    assert totals(results, "cachedWriteTokens") == sum(b.cache_write for b in bills)
    assert totals(results, "inputTokens") == sum(b.input for b in bills)
    for request in server.requests:
        marks = json.dumps(request.body).count('"cache_control"')
        assert 2 <= marks <= 4


async def test_anthropic_without_prompt_cache_pays_the_full_input_price(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    config = tmp_path / "c.toml"
    config.write_text("[limits]\nprompt-cache = false\n")
    prompts = script(server, "tool_calls", "stop")
    _, usage = await run_session(checker, state_dir, workspace, "anthropic:claude-sonnet-4-5",
                                 server.url, prompts, "--config", str(config))  # fmt: skip
    assert server.billing is not None
    bills = server.billing.bills
    assert all(b.cached == b.cache_write == 0 for b in bills)
    assert all("cache_control" not in json.dumps(r.body) for r in server.requests)
    info = model_info("anthropic", "claude-sonnet-4-5")
    assert usage["cost"]["amount"] == pytest.approx(billed(info, bills), abs=1e-6)


async def test_openai_session_reads_the_previous_prompt_and_reports_the_billed_cost(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer
) -> None:
    """A compatible endpoint (the fake by base URL) gets no prompt_cache_key; the prefix is
    cached all the same, in 128-token steps."""
    prompts = script(server, "tool_calls", "stop")
    results, usage = await run_session(checker, state_dir, workspace, "openai:gpt-4.1",
                                       server.openai_url, prompts)  # fmt: skip
    assert server.billing is not None
    bills = server.billing.bills
    assert bills[0].cached == 0 and bills[0].input >= 1024
    for before, now in itertools.pairwise(bills):
        assert now.cached == before.input // 128 * 128
    assert all("prompt_cache_key" not in r.body for r in server.requests)
    info = model_info("openai", "gpt-4.1")
    assert usage["cost"]["amount"] == pytest.approx(billed(info, bills), abs=1e-6)
    assert totals(results, "cachedReadTokens") == sum(b.cached for b in bills)
