"""Long sessions never break (issue 11): through the real SDKs against fakes that enforce
the APIs' rules and the model's window (``tests.fakes.api_rules``), a 60-call session
crosses the window twice over and ends ``end_turn``; a server whose window is smaller
than the agent believes is recovered from; what can never fit is a clear error."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fakes.api_rules import count_tokens, violation
from .fakes.llm_server import (
    FakeLLMServer,
    Finish,
    RecordedRequest,
    Reply,
    Response,
    Text,
    ToolCall,
    Usage,
)
from .harness import AgentProcess
from .schema_check import SchemaChecker
from .test_sessions import load

MODELS = {"openai": "openai:gpt-4.1", "anthropic": "anthropic:claude-sonnet-4-5"}
SUMMARY_ASK = "answer with the summary only"


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def last_user_text(req: RecordedRequest) -> str:
    messages = req.body.get("messages", []) if isinstance(req.body, dict) else []
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def summaries(req: RecordedRequest) -> Response | None:
    """Every summary request gets a summary; the rest comes from the queue."""
    if SUMMARY_ASK in last_user_text(req):
        return Reply([Text("## Summary\n- Read files f0 onwards; keep going."), Usage(100, 20),
                      Finish("stop")])
    return None


def agent_for(checker: SchemaChecker, state_dir: str, tmp_path: Path, server: FakeLLMServer,
              vendor: str, window: int | None) -> AgentProcess:
    model = MODELS[vendor]
    config = tmp_path / "config.toml"
    lines = ["[limits]", "max-turn-requests = 200", "first-event-timeout = 60"]
    if window is not None:
        name = model.split(":", 1)[1]
        lines += [f'[model-overrides."{name}"]', f"context-window = {window}",
                  "max-output-tokens = 2000"]
    config.write_text("\n".join(lines) + "\n")
    url = server.openai_url if vendor == "openai" else server.url
    key = "OPENAI_API_KEY" if vendor == "openai" else "ANTHROPIC_API_KEY"
    return AgentProcess(checker, "--state-dir", state_dir, "--model", model, "--base-url", url,
                        "--config", str(config), env={key: "k"})


def reads(n: int) -> list[Reply]:
    return [
        Reply([ToolCall(f"call_{i}", "read_file", json.dumps({"path": f"f{i}.txt"})),
               Usage(1000, 10), Finish("tool_calls")])
        for i in range(n)
    ]


def files(workspace: str, n: int, size: int) -> None:
    for i in range(n):
        Path(workspace, f"f{i}.txt").write_text(
            "".join(f"line {k} of file {i}: {'data ' * 8}\n" for k in range(size // 50))
        )


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_sixty_calls_cross_the_window_twice_and_end_well(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer, vendor: str,
) -> None:
    window = 12_000
    files(workspace, 60, 6_000)  # ~1,500 tokens a read: ~90 k tokens read, 7.5 windows
    server.window = window
    server.responder = summaries
    server.enqueue(*reads(60), Reply([Text("All 60 files read."), Usage(1000, 5), Finish("stop")]))
    agent = agent_for(checker, state_dir, tmp_path, server, vendor, window)
    async with agent:
        await agent.initialize({"session": {"compaction": {}}})
        sid = await agent.new_session(workspace)
        result = await agent.prompt(sid, "Read f0.txt to f59.txt, one at a time.")
        assert result["stopReason"] == "end_turn"
        finals = [u for u in agent.updates_of(sid, "tool_call_update") if u.get("status")]
        assert sum(u["status"] == "completed" for u in finals) == 60
        peak = max(count_tokens(r.body) for r in server.requests)
        assert peak <= window  # every request fitted (the fake refuses more)
        compactions = agent.updates_of(sid, "compaction_update")
        assert [c["status"] for c in compactions if c["status"] != "in_progress"]
        assert all(c["status"] == "completed" for c in compactions
                   if c["status"] not in ("in_progress",))
        final = server.requests[-1].body["messages"]
        assert "Read f0.txt to f59.txt" in json.dumps(final)  # the task survived compaction
    async with agent_for(checker, state_dir, tmp_path, server, vendor, window) as again:
        await again.initialize()
        await load(again, sid, workspace)
        server.enqueue(Reply([Text("still here"), Finish("stop")]))
        assert (await again.prompt(sid, "and now?"))["stopReason"] == "end_turn"


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_smaller_window_than_believed_is_recovered_from(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer, vendor: str,
) -> None:
    files(workspace, 12, 8_000)
    server.window = 12_000  # the agent believes the table's 1 M / 200 k
    server.responder = summaries
    server.enqueue(*reads(12), Reply([Text("done"), Finish("stop")]))
    async with agent_for(checker, state_dir, tmp_path, server, vendor, None) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "read them all"))["stopReason"] == "end_turn"
        refused = [r for r in server.requests if violation(vendor, r.body, 12_000) is not None]
        assert refused  # the agent learned the window from the vendor's own error
        usage = agent.updates_of(sid, "usage_update")[-1]
        assert usage["size"] == 12_000  # the window the server named is believed


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_what_can_never_fit_is_a_clear_error(
    checker: SchemaChecker, state_dir: str, workspace: str, tmp_path: Path,
    server: FakeLLMServer, vendor: str,
) -> None:
    server.window = 2_000
    async with agent_for(checker, state_dir, tmp_path, server, vendor, None) as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        response = await agent.request_raw("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "x " * 20_000}]})
        error: dict[str, Any] = response["error"]
        assert error["code"] == -32603
        assert "context window" in error["message"] and "new session" in error["message"]
        server.window = None
        server.enqueue(Reply([Text("fine"), Finish("stop")]))
        assert (await agent.prompt(sid, "short"))["stopReason"] == "end_turn"
