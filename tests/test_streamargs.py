"""Reading a tool call's arguments while they stream, and the title they give the call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_agent.engine.streamargs import LiveCall, StreamedArguments
from acp_agent.protocol import types as t
from acp_agent.tools import builtin_tools
from acp_agent.tools.base import ToolContext

from .tools.fake_client import FakeClient

DOCS: list[dict[str, Any]] = [
    {"path": "src/app.py", "content": 'print("a, b}")\n\\ "quoted" {x}\n'},
    {"n": 123, "f": -1.5e3, "t": True, "no": False, "z": None},
    {"nested": {"a": [1, {"b": "}"}], "c": {}}, "list": [], "s": ""},
    {"unicode": "caf\u00e9 \u2603 \U0001f600", "esc": "\u0000\t"},
    {"slashes": "\\", "more": '\\"\\\\"', "end": "\\\\", "after": 1},
    {},
]


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("doc", DOCS, ids=range(len(DOCS)))
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_members_complete_in_order_and_are_never_wrong(doc: dict[str, Any], size: int) -> None:
    text = json.dumps(doc, indent=1 if size == 3 else None)
    args = StreamedArguments()
    completed = 0
    for piece in pieces(text, size):
        grew = args.feed(piece)
        assert grew == (len(args.members) > completed)
        completed = len(args.members)
        assert list(args.members) == list(doc)[: len(args.members)]  # a prefix, in order
        assert all(doc[k] == v for k, v in args.members.items())  # never a partial value
    assert args.members == doc


def test_a_value_counts_only_once_its_delimiter_arrived() -> None:
    args = StreamedArguments()
    assert not args.feed('{"timeout_ms": 12')  # 12 may be the start of 1200
    assert not args.feed("00")
    assert args.feed(', "flag": tru')  # the comma ends 1200
    assert args.members == {"timeout_ms": 1200}
    assert not args.feed("e")
    assert args.feed("}")
    assert args.members == {"timeout_ms": 1200, "flag": True}


def test_a_string_holding_delimiters_is_not_cut() -> None:
    args = StreamedArguments()
    args.feed('{"command": "echo \\"a, b}\\", ')
    assert args.members == {}
    args.feed('done", "cwd": "x"}')
    assert args.members == {"command": 'echo "a, b}", done', "cwd": "x"}


@pytest.mark.parametrize("text", ['[1, 2]', '"text"', '{1: 2}', '{"a" 1}', '{"a": 1 "b": 2}'])
def test_what_is_not_an_object_stops_the_reading(text: str) -> None:
    args = StreamedArguments()
    for piece in pieces(text + ', "late": 1}', 1):
        args.feed(piece)
    assert "late" not in args.members


def test_a_string_that_is_not_json_stops_the_reading() -> None:
    args = StreamedArguments()
    args.feed('{"a": 1, "b": "bad \\x escape", "c": 2}')
    assert args.members == {"a": 1}


def test_whitespace_before_the_object_is_fine() -> None:
    args = StreamedArguments()
    assert not args.feed("  \n ")
    assert args.feed('{ "a" : 1 ,')
    assert args.members == {"a": 1}


# --------------------------------------------------------------------------- LiveCall


def context(ws: Path) -> ToolContext:
    async def emit(update: t.SessionUpdate) -> None:
        raise AssertionError("describing a call never emits")

    return ToolContext(session_id="s", cwd=str(ws), roots=[str(ws)], client=FakeClient(),
                       tool_call_id="call_1", emit=emit)


def live(name: str, ws: Path) -> LiveCall:
    tool = builtin_tools().get(name)
    assert tool is not None
    return LiveCall("call_1", tool, context(ws))


def updates(call: LiveCall, text: str, size: int = 5) -> list[t.ToolCallUpdateSessionUpdate]:
    return [u for piece in pieces(text, size) if (u := call.feed(piece)) is not None]


def test_a_write_is_titled_by_its_path_before_its_content_ends(tmp_path: Path) -> None:
    call = live("write_file", tmp_path)
    text = json.dumps({"path": "src/app.py", "content": "x = 1\n" * 50})
    head = text[: text.index("x = 1")]  # the path, then the start of the content
    (first,) = updates(call, head)
    assert first.tool_call_id == "call_1" and first.title == "Write src/app.py"
    assert first.locations == [t.ToolCallLocation(path=str(tmp_path / "src/app.py"))]
    assert updates(call, text[len(head) :]) == []  # the same title: nothing more to say


def test_an_edit_is_titled_before_old_and_new_strings(tmp_path: Path) -> None:
    call = live("edit_file", tmp_path)
    text = json.dumps({"path": "a.py", "old_string": "x" * 300, "new_string": "y" * 300})
    (first,) = updates(call, text)
    assert first.title == "Edit a.py"


def test_a_command_is_titled_when_complete_and_retitled_by_its_cwd(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    call = live("run_command", tmp_path)
    got = updates(call, json.dumps({"command": "pytest -q", "cwd": "src", "timeout_ms": 5000}))
    assert [u.title for u in got] == ["Run `pytest -q`", "Run `pytest -q` in src"]


def test_nothing_is_said_while_a_required_member_is_missing(tmp_path: Path) -> None:
    call = live("move_file", tmp_path)
    text = json.dumps({"source": "a.txt", "destination": "b.txt"})
    got = updates(call, text, size=3)
    assert [u.title for u in got] == ["Move a.txt \u2192 b.txt"]  # only once both are known


def test_arguments_the_tool_refuses_give_no_title(tmp_path: Path) -> None:
    call = live("read_file", tmp_path)
    assert updates(call, json.dumps({"path": "a.txt", "bogus": 1})) != []  # path: a title
    call = live("read_file", tmp_path)
    assert updates(call, json.dumps({"bogus": 1, "path": "a.txt"})) == []  # unknown first
