"""GPT-5 models edit with apply_patch, through the real OpenAI SDK against the fake: a
custom (free-text, grammar-bound) tool on the Responses API at OpenAI, a function taking
the patch over Chat Completions; a patch that fails is an error naming the hunk, and
nothing changes. Other models keep edit_file/write_file/move_file."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_agent.tools.patch import GRAMMAR

from .fakes.llm_server import FakeLLMServer, Finish, Reply, Text, ToolCall
from .routes import CHAT, GPT5_CHAT, RESPONSES, Route
from .schema_check import SchemaChecker

GOOD = ("*** Begin Patch\n*** Update File: hello.txt\n@@\n hello\n-world\n+patched world\n"
        "*** Add File: added.txt\n+new\n*** End Patch\n")  # fmt: skip
BAD = ("*** Begin Patch\n*** Update File: hello.txt\n@@ nowhere\n-world\n+x\n"
       "*** End Patch\n")  # fmt: skip


@pytest.fixture
async def server() -> AsyncIterator[FakeLLMServer]:
    async with FakeLLMServer() as s:
        yield s


def call(route: Route, call_id: str, patch: str) -> ToolCall:
    if route is RESPONSES:
        return ToolCall(call_id, "apply_patch", patch)  # the patch itself
    return ToolCall(call_id, "apply_patch", json.dumps({"input": patch}))


@pytest.mark.parametrize("route", [RESPONSES, GPT5_CHAT], ids=lambda r: r.name)
async def test_apply_patch_applies_and_a_bad_hunk_is_named(
    route: Route, checker: SchemaChecker, state_dir: str, workspace: str,
    server: FakeLLMServer, tmp_path: Path,
) -> None:  # fmt: skip
    server.enqueue(
        Reply([call(route, "c1", BAD), Finish("tool_calls")]),
        Reply([call(route, "c2", GOOD), Finish("tool_calls")]),
        Reply([Text("done"), Finish("stop")]),
    )
    async with route.agent(checker, state_dir, server, tmp_path, "--mode", "bypass") as agent:
        await agent.initialize()
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "patch it"))["stopReason"] == "end_turn"
        finals = [u for u in agent.updates_of(sid, "tool_call_update")
                  if u.get("status") in ("completed", "failed")]  # fmt: skip
        diffs = [c for u in finals for c in u.get("content", []) if c["type"] == "diff"]
        calls = [(u["sessionUpdate"], u["toolCallId"], u.get("status"))
                 for u in agent.updates_of(sid) if u["sessionUpdate"].startswith("tool_call")]
    # (what every call went through, should this fail again: it did once, in a full run's
    # first test, and never alone)
    assert [u["status"] for u in finals] == ["failed", "completed"], (
        calls, [route.tool_results(r.body) for r in server.requests[1:]])
    assert {d["path"] for d in diffs} == {str(Path(workspace) / n)
                                          for n in ("hello.txt", "added.txt")}  # fmt: skip
    assert (Path(workspace) / "hello.txt").read_text() == "hello\npatched world\n"
    assert (Path(workspace) / "added.txt").read_text() == "new\n"
    first, second, third = (r.body for r in server.requests)
    names = route.tool_names(first)
    assert "apply_patch" in names and not {"edit_file", "write_file", "move_file"} & set(names)
    plan = next(t for t in route.tools(first) if t["name"] == "update_plan")
    assert set(plan["parameters"]["properties"]) == {"plan", "explanation"}
    failed = route.tool_results(second)[-1]
    assert "hello.txt, hunk 1 (`@@ nowhere`): the line `nowhere` was not found" in failed
    assert "Nothing was changed" in failed
    if route is RESPONSES:
        patch_tool = next(t for t in first["tools"] if t["name"] == "apply_patch")
        assert patch_tool["type"] == "custom" and "parameters" not in patch_tool
        assert patch_tool["format"] == {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}
        kinds = [i["type"] for i in third["input"] if i.get("type") != "message"]
        assert kinds == ["custom_tool_call", "custom_tool_call_output"] * 2
        sent = [i for i in third["input"] if i.get("type") == "custom_tool_call"]
        assert [i["input"] for i in sent] == [BAD, GOOD]
        assert first["prompt_cache_key"] == sid  # the official endpoint gets the session's key
    else:
        fn = next(t["function"] for t in first["tools"] if t["function"]["name"] == "apply_patch")
        assert fn["parameters"]["required"] == ["input"]
        assert "prompt_cache_key" not in first


async def test_other_models_keep_the_standard_tools_and_config_can_switch(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    """gpt-4.1 keeps edit_file; `tool-style = "codex"` in its overrides gives it apply_patch."""
    server.enqueue(Reply([Text("a"), Finish("stop")]), Reply([Text("b"), Finish("stop")]))
    async with CHAT.agent(checker, state_dir, server, tmp_path) as agent:
        await agent.initialize()
        await agent.prompt(await agent.new_session(workspace), "hi")
    standard = CHAT.tool_names(server.requests[0].body)
    assert {"edit_file", "write_file", "move_file"} <= set(standard)
    assert "apply_patch" not in standard
    switched = Route("chat", CHAT.model,
                     '[model-overrides."openai:gpt-4.1"]\ntool-style = "codex"\n')
    async with switched.agent(checker, state_dir, server, tmp_path) as agent:
        await agent.initialize()
        await agent.prompt(await agent.new_session(workspace), "hi")
    codex: Any = CHAT.tool_names(server.requests[1].body)
    assert "apply_patch" in codex and "edit_file" not in codex


async def test_in_ask_mode_a_patch_asks_once_with_every_files_diff_and_stays_in_the_roots(
    checker: SchemaChecker, state_dir: str, workspace: str, server: FakeLLMServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The question shows each file's diff before anything changes; a rejection changes
    nothing; a patch naming a file outside the roots is asked about as such (never
    covered by an "always"), and rejected, writes nothing."""
    from .harness import select_kind

    outside = ("*** Begin Patch\n*** Add File: ../escape.txt\n+x\n*** End Patch\n")
    server.enqueue(
        Reply([call(GPT5_CHAT, "c1", GOOD), Finish("tool_calls")]),
        Reply([call(GPT5_CHAT, "c2", GOOD), Finish("tool_calls")]),
        Reply([call(GPT5_CHAT, "c3", outside), Finish("tool_calls")]),
        Reply([Text("done"), Finish("stop")]),
    )
    answers = iter(["reject_once", "allow_once", "reject_once"])
    async with GPT5_CHAT.agent(checker, state_dir, server, tmp_path) as agent:
        agent.handlers["session/request_permission"] = (
            lambda params: select_kind(next(answers))(params))  # fmt: skip
        await agent.initialize()
        sid = await agent.new_session(workspace)
        assert (await agent.prompt(sid, "patch it"))["stopReason"] == "end_turn"
        asked = [r["params"] for r in agent.client_requests
                 if r["method"] == "session/request_permission"]  # fmt: skip
    assert len(asked) == 3
    escape = asked[2]["toolCall"]
    assert [c["path"] for c in escape["content"] if c["type"] == "diff"] == [
        os.path.normpath(os.path.join(workspace, "..", "escape.txt"))]
    assert "allow_always" not in {o["kind"] for o in asked[2]["options"]}
    for question in asked[:2]:
        diffs = {c["path"]: c for c in question["toolCall"]["content"] if c["type"] == "diff"}
        assert set(diffs) == {str(Path(workspace) / n) for n in ("hello.txt", "added.txt")}
        assert diffs[str(Path(workspace) / "hello.txt")]["newText"] == "hello\npatched world\n"
    results = GPT5_CHAT.tool_results(server.requests[-1].body)
    assert "rejected" in results[0].lower()
    assert "rejected" in results[2].lower()
    assert (Path(workspace) / "hello.txt").read_text() == "hello\npatched world\n"
    assert not Path(workspace, "..", "escape.txt").exists()
