"""The outline reader: nesting depth and top-level members without recursion."""

from __future__ import annotations

from typing import Any

import pytest

from acp_agent.rpc.outline import NESTED, UNREADABLE, depth, lone_surrogate, outline, too_deep


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"a":1}', 1),
    (b'{"a":[1,{"b":[]}]}', 4),
    (b'{"a":"[[[[{{{{"}', 1),
    (b'{"a":"\\"[[[","b":"\\\\","c":[]}', 2),
    (b'{"a":"x\\\\\\"[[["}', 1),
    (b"[" * 5000 + b"]" * 5000, 5000),
    (b"", 0),
])
def test_depth_ignores_brackets_in_strings(line: bytes, expected: int) -> None:
    assert depth(line) == expected


def test_too_deep_counts_only_structure() -> None:
    text = b'"' + b"[" * 1000 + b'"'
    assert not too_deep(b'{"prompt":' + text + b"}")
    assert too_deep(b'{"a":' + b"[" * 128 + b"]" * 128 + b"}")
    assert not too_deep(b'{"a":' + b"[" * 127 + b"]" * 127 + b"}")


@pytest.mark.parametrize(("line", "values"), [
    (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"id":9}}',
     {"jsonrpc": "2.0", "id": 1, "method": "m", "params": NESTED}),
    (b' { "id" : "a\\"b" , "k\\\\" : [ "]" ] } ', {"id": 'a"b', "k\\": NESTED}),
    (b'{"id":"\\ud800","x":1e999,"y":nul}', {"id": UNREADABLE, "x": UNREADABLE, "y": UNREADABLE}),
    (b'{"\\ud800":1,"id":2}', {"id": 2}),
    (b"{}", {}),
])
def test_outline_reads_top_level_members(line: bytes, values: dict[str, Any]) -> None:
    shape = outline(line)
    assert shape is not None and shape.values == values


@pytest.mark.parametrize("line", [
    b'{"id":1', b'{"id":1,}', b'{"id":1} {}', b'[{"id":1}]', b'{"id":1,"a":[}', b'{"id":"1}',
    b'{"id" 1}', b"", b'"id"', b'{"a":[[[1]]}',
])
def test_outline_of_an_incomplete_object_is_none(line: bytes) -> None:
    assert outline(line) is None


def test_outline_skips_deep_members_and_reports_their_depth() -> None:
    levels = 200_000
    line = b'{"params":' + b'{"k":' * levels + b"0" + b"}" * levels + b',"id":"late"}'
    shape = outline(line)
    assert shape is not None
    assert shape.values == {"params": NESTED, "id": "late"}
    assert shape.depths == {"params": levels + 1} and shape.deepest() == "params"


def test_lone_surrogates() -> None:
    assert lone_surrogate(b'"\\ud800"') == (1, "\\ud800")
    assert lone_surrogate(b'"x\\uDC00"') == (2, "\\uDC00")
    assert lone_surrogate(b'"\\ud83d\\ude00"') is None  # a pair: one emoji
    assert lone_surrogate(b'"\\\\ud800"') is None  # an escaped backslash, then text
    assert lone_surrogate(b'"\\ud800\\ud800\\udc00"') == (1, "\\ud800")
