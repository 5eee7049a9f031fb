"""A message's outline, read without recursion: how deeply it nests, and its top-level
members.

msgspec (like every recursive parser) gives up on values nested about a thousand levels
deep, and whatever a handler does with a deep value may recurse too. So the connection
refuses messages nested more than :data:`MAX_DEPTH` levels before decoding them (the
limit serde_json, the Rust SDK's parser, applies to every ACP message it reads).

When a message cannot be decoded (too deep, invalid UTF-8, a lone surrogate escape,
malformed JSON inside a member), :func:`outline` still reads its outer object: the
top-level keys and their scalar values, skipping nested values and strings without
recursion, so the error can go back with the request's ``id``, and a notification can
go unanswered. A nested ``id`` is never looked at. Everything here works on whole byte
strings with C-speed primitives (``split``, ``translate``, ``accumulate``): a few Python
steps per string and per top-level member, none per byte.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Any

import msgspec

MAX_DEPTH = 128
"""The deepest nesting of arrays and objects a message may have (the outer object is 1)."""

NESTED: Any = type("Nested", (), {"__repr__": lambda self: "NESTED", "__slots__": ()})()
"""An outline's value for a member that is an array or an object (not read)."""

UNREADABLE: Any = type("Unreadable", (), {"__repr__": lambda self: "UNREADABLE", "__slots__": ()})()
"""An outline's value for a scalar member that does not decode (bad escape, bad number)."""

_OPEN, _CLOSE = b"[{", b"]}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_OPENING = bytes(b for b in range(256) if b not in _OPEN)
_SIGNS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # as signed bytes: +1 / -1
_SIGNS_ALL = bytes(1 if b in _OPEN else 255 if b in _CLOSE else 0 for b in range(256))
# Patterns as text, compiled (and kept) by ``re`` on first use: only a line that fails
# to decode needs them, and start-up loads this module.
_WS = rb"[ \t\r\n]*"
_SCALAR = rb"[^,\]}\s]*"
_LONE_SURROGATE = (
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _unescaped(line: bytes) -> bytes:
    """``line`` with its two-character escapes ``\\\\`` and ``\\"`` blanked (same length):
    every ``"`` left opens or closes a string."""
    if b"\\" not in line:
        return line
    return line.replace(b"\\\\", b"__").replace(b'\\"', b"__")


def depth(line: bytes) -> int:
    """How deeply ``line`` nests arrays and objects (brackets inside strings don't count)."""
    outside = b"".join(_unescaped(line).split(b'"')[::2])
    signs = memoryview(outside.translate(_SIGNS, _NOT_BRACKETS)).cast("b")
    return max(itertools.accumulate(signs), default=0)


def too_deep(line: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``line`` nests more than ``limit`` levels (cheap unless it has more than
    ``limit`` opening brackets)."""
    if len(line.translate(None, _NOT_OPENING)) <= limit:
        return False
    return depth(line) > limit


def lone_surrogate(line: bytes) -> tuple[int, str] | None:
    """The first ``\\uD800``-style escape in ``line`` that is half a surrogate pair
    (JSON allows it, UTF-8 cannot carry it): (byte offset, the escape)."""
    match = re.search(_LONE_SURROGATE, line.replace(b"\\\\", b"__"))
    return None if match is None else (match.start(), match.group().decode())


class Outline:
    """The top-level members of a JSON object: ``values`` maps each readable key to its
    decoded scalar, :data:`NESTED` or :data:`UNREADABLE`; ``depths`` the nesting of each
    nested member (an array directly under the outer object is 2 deep)."""

    __slots__ = ("depths", "values")

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.depths: dict[str, int] = {}

    def deepest(self) -> str | None:
        return max(self.depths, key=self.depths.__getitem__, default=None)


def outline(line: bytes) -> Outline | None:
    """The outline of ``line`` if it is one complete JSON object (nested values are only
    checked for balanced brackets), else ``None``."""
    s = _unescaped(line)
    parts = s.split(b'"')
    if len(parts) % 2 == 0:
        return None  # a string never ends
    signs: memoryview | None = None
    out = Outline()
    n = len(s)
    i = _skip(s, 0)
    if s[i : i + 1] != b"{":
        return None
    i = _skip(s, i + 1)
    if s[i : i + 1] == b"}":
        return out if _skip(s, i + 1) == n else None
    while True:
        if s[i : i + 1] != b'"':
            return None
        end = s.index(b'"', i + 1) + 1
        key = _scalar(line[i:end])
        i = _skip(s, end)
        if s[i : i + 1] != b":":
            return None
        i = _skip(s, i + 1)
        first = s[i : i + 1]
        if first == b'"':
            end = s.index(b'"', i + 1) + 1
            value = _scalar(line[i:end])
        elif first and first in _OPEN:
            if signs is None:
                parts[1::2] = [bytes(len(p)) for p in parts[1::2]]
                signs = memoryview(b'"'.join(parts).translate(_SIGNS_ALL)).cast("b")
            try:
                end = i + operator.indexOf(itertools.accumulate(signs[i:]), 0) + 1
            except ValueError:
                return None  # never closed
            value = NESTED
            if isinstance(key, str):
                out.depths[key] = 1 + max(itertools.accumulate(signs[i:end]))
        else:
            end = _end(_SCALAR, s, i)
            if end == i:
                return None
            value = _scalar(line[i:end])
        if isinstance(key, str):
            out.values[key] = value
        i = _skip(s, end)
        sep = s[i : i + 1]
        i = _skip(s, i + 1)
        if sep == b"}":
            return out if i == n else None
        if sep != b",":
            return None


def _end(pattern: bytes, s: bytes, i: int) -> int:
    match = re.compile(pattern).match(s, i)  # (``re`` keeps the compiled pattern)
    return i if match is None else match.end()


def _skip(s: bytes, i: int) -> int:
    return _end(_WS, s, i)


def _scalar(token: bytes) -> Any:
    try:
        return msgspec.json.decode(token)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return UNREADABLE
