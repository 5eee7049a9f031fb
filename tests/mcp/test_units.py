"""The hub's pure parts: names, prompt arguments, the annotation mapping, result
conversion; and that importing the package leaves the SDK unloaded."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import mcp.types as m
import pytest

from acp_agent.conversation import ImagePart
from acp_agent.errors import ToolError
from acp_agent.mcp._convert import model_view, prompt_content, tool_output
from acp_agent.mcp._names import Namer, command_name, prompt_arguments, sanitize, tool_name
from acp_agent.mcp._server import describe
from acp_agent.mcp._tool import classify
from acp_agent.protocol import types as t


class TestNames:
    def test_tool_names_are_sanitized_namespaced_and_unique(self) -> None:
        """Odd characters become ``_``; the same tool always gets the same name back."""
        namer = Namer(limit=64)
        assert tool_name(namer, "gh", "") == "mcp__gh__x"
        assert tool_name(namer, "gh", "search.issues/v2") == "mcp__gh__search_issues_v2"
        assert tool_name(namer, "gh", "search issues v2") == "mcp__gh__search_issues_v2_2"
        assert tool_name(namer, "gh", "search.issues/v2") == "mcp__gh__search_issues_v2"

    def test_long_tool_names_are_cut_to_64_with_a_hash(self) -> None:
        namer = Namer(limit=64)
        a = tool_name(namer, "server", "x" * 80 + "a")
        b = tool_name(namer, "server", "x" * 80 + "b")
        assert len(a) == len(b) == 64 and a != b
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in (a, b))

    def test_sanitize(self) -> None:
        assert sanitize("my server!") == "my_server"
        assert sanitize("???") == "x"
        assert sanitize("a b.c", command=True) == "a_b.c"

    def test_command_names_have_no_spaces(self) -> None:
        namer = Namer()
        assert command_name(namer, "docs", "Summarize page") == "mcp:docs:Summarize_page"
        assert command_name(namer, "docs", "Summarize:page") == "mcp:docs:Summarize_page_2"


class TestPromptArguments:
    @pytest.mark.parametrize(("text", "names", "expected"), [
        ("", ["a"], {}),
        ("anything at all", [], {}),
        ("  two words ", ["topic"], {"topic": "two words"}),
        ("a=1 b='x y'", ["a", "b"], {"a": "1", "b": "x y"}),
        ("just text", ["a", "b"], {"a": "just text"}),
        ("a=1 c=2", ["a", "b"], {"a": "a=1 c=2"}),
        ("a='unbalanced", ["a", "b"], {"a": "'unbalanced"}),
    ])
    def test_mapping(self, text: str, names: list[str], expected: dict[str, str]) -> None:
        assert prompt_arguments(text, names) == expected


class TestClassify:
    @pytest.mark.parametrize(("hints", "expected"), [
        (None, ("other", "execute")),
        ({}, ("other", "execute")),
        ({"title": "Only a title"}, ("other", "execute")),
        ({"read_only_hint": True}, ("read", "read")),
        ({"read_only_hint": True, "open_world_hint": True}, ("fetch", "read")),
        ({"destructive_hint": True}, ("edit", "execute")),
        ({"read_only_hint": False}, ("edit", "execute")),
        ({"destructive_hint": False}, ("edit", "execute")),
        ({"destructive_hint": False, "open_world_hint": False}, ("edit", "write")),
    ])
    def test_mapping(self, hints: dict[str, Any] | None, expected: tuple[str, str]) -> None:
        annotations = None if hints is None else m.ToolAnnotations(**hints)
        assert classify(annotations) == expected


class TestConvert:
    def test_structured_content_without_text_becomes_json_text(self) -> None:
        out = tool_output(m.CallToolResult(content=[], structured_content={"n": 1}))
        assert json.loads(out.text) == {"n": 1}
        assert out.raw_output == {"n": 1}
        assert len(out.content) == 1

    def test_empty_result_says_so(self) -> None:
        assert tool_output(m.CallToolResult(content=[])).text == "(no output)"

    def test_error_without_text(self) -> None:
        with pytest.raises(ToolError, match="reported an error"):
            tool_output(m.CallToolResult(content=[], is_error=True))

    def test_long_text_is_bounded(self) -> None:
        out = tool_output(m.CallToolResult(content=[m.TextContent(text="x" * 1000)]), limit=100)
        assert len(out.text) < 200 and "omitted" in out.text
        assert out.content[0].content.text == "x" * 1000  # the editor gets it all

    def test_blob_resources(self) -> None:
        image = m.EmbeddedResource(resource=m.BlobResourceContents(
            uri="file:///a.png", mime_type="image/png", blob="AAAA"))
        other = m.EmbeddedResource(
            resource=m.BlobResourceContents(uri="file:///a.bin", blob="AAAA"))
        out = tool_output(m.CallToolResult(content=[image, other]))
        assert out.images == [ImagePart(data="AAAA", mime_type="image/png")]
        assert "[binary resource file:///a.bin (unknown type, 3 bytes)]" in out.text
        assert out.content[1].content.resource.blob == "AAAA"

    def test_audio_is_described_to_the_model(self) -> None:
        block = t.AudioContent(data="AAAA", mime_type="audio/wav")
        assert model_view(block) == ("[audio (audio/wav) not shown]", None)

    def test_prompt_of_user_messages_is_plain(self) -> None:
        result = m.GetPromptResult(messages=[
            m.PromptMessage(role="user", content=m.TextContent(text="one")),
            m.PromptMessage(role="user",
                            content=m.ImageContent(data="AAAA", mime_type="image/png")),
        ])
        assert prompt_content(result) == [
            t.TextContent(text="one"), t.ImageContent(data="AAAA", mime_type="image/png")]

    def test_describe_looks_into_exception_groups(self) -> None:
        group = ExceptionGroup("outer", [ExceptionGroup("inner", [ConnectionError("refused")])])
        assert describe(group) == "refused"
        assert describe(RuntimeError()) == "RuntimeError"
        assert describe(KeyError("k")) == "KeyError: 'k'"


def test_importing_the_package_does_not_import_the_sdk() -> None:
    """Sessions without MCP servers never pay for the SDK."""
    code = (
        "import sys, acp_agent.mcp\n"
        "sdk = ('mcp', 'mcp_types', 'httpx2', 'anyio')\n"
        "bad = [n for n in sys.modules if n.split('.')[0] in sdk]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
