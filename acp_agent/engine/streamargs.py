"""A tool call's arguments while the model is still writing them.

Providers stream a call's argument JSON in pieces (:class:`~acp_agent.providers.base.
ToolCallDelta`). The client is shown the call as soon as it starts; its title is made
from the members that are already complete (``path`` of a ``write_file`` arrives long
before its ``content``), so the user sees "Write src/app.py" while the file is written.

:class:`StreamedArguments` reads the top-level members of the object as they complete.
A member counts as complete once the delimiter after its value (``,`` or ``}``) has
arrived, so a number or literal cut at the end of a piece is never read early. Parsing
resumes after the last complete member and is only retried when a piece holds a comma
or a closing brace (a member cannot complete without one); while a string value is
open (a file's content), each piece is scanned for its closing quote alone, so a long
argument costs linear time, not a re-parse per piece.
Anything that is not a JSON object, or breaks the grammar, stops the reading for good:
the call's final arguments are parsed (and any error reported) whole when it is ready.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal

from ..protocol import types as t

if TYPE_CHECKING:
    from ..tools.base import Tool, ToolContext

_DECODER = json.JSONDecoder()
_WS = " \t\n\r"
_ENDS = frozenset(",}")  # a member is complete once one of these follows its value
_STRING_STOP = re.compile(r'["\\]')


class StreamedArguments:
    __slots__ = ("_broken", "_escaped", "_in_string", "_opened", "_pieces", "_pos", "members")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._pos = 0  # just after the last complete member (or the opening brace)
        self._opened = False
        self._broken = False
        self._in_string = False  # the text ends inside a string value
        self._escaped = False  # ... right after a backslash
        self.members: dict[str, Any] = {}

    def feed(self, piece: str) -> bool:
        """Add ``piece``; whether a member was completed by it."""
        if self._broken or not piece:
            return False
        self._pieces.append(piece)
        if self._in_string:  # only its closing quote matters: scan just this piece
            closed, self._escaped = _scan_string(piece, 0, self._escaped)
            if not closed:
                return False
            self._in_string = False
        elif self._opened and _ENDS.isdisjoint(piece):
            return False
        before = len(self.members)
        self._read()
        return len(self.members) > before

    def _read(self) -> None:
        text = "".join(self._pieces)
        self._pieces = [text]
        pos = _skip(text, self._pos)
        if not self._opened:
            if pos >= len(text):
                return
            if text[pos] != "{":
                self._broken = True
                return
            self._opened = True
            self._pos = pos = _skip(text, pos + 1)
        while pos < len(text):
            if text[pos] == "}":
                return  # the object is complete: ToolCallReady has it all
            if self.members and text[pos] == ",":
                pos = _skip(text, pos + 1)
            elif self.members:
                self._broken = True
                return
            member = self._member(text, pos)
            if member is None:
                return  # incomplete: wait for more
            if member is False:
                self._broken = True
                return
            key, value, end = member
            self.members[key] = value
            self._pos = pos = end

    def _member(self, text: str, pos: int) -> tuple[str, Any, int] | Literal[False] | None:
        """The member at ``pos``: ``(key, value, position of its delimiter)``; ``None``
        when it is not complete yet; ``False`` when the text cannot be an object's member.
        A value that does not decode yet is taken as incomplete (if it never completes,
        the ready call reports the error); an open string value is remembered, so later
        pieces are scanned for its end alone."""
        if pos >= len(text):
            return None
        if text[pos] != '"':
            return False
        try:
            key, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        pos = _skip(text, pos)
        if pos >= len(text):
            return None
        if text[pos] != ":":
            return False
        pos = _skip(text, pos + 1)
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            if pos < len(text) and text[pos] == '"':
                closed, escaped = _scan_string(text, pos + 1, False)
                if closed:
                    return False  # a complete string that is not valid JSON
                self._in_string, self._escaped = True, escaped
            return None
        end = _skip(text, end)
        if end >= len(text):
            return None  # `12` may be `123`: wait for the delimiter
        if text[end] not in ",}":
            return False
        return key, value, end


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _scan_string(text: str, pos: int, escaped: bool) -> tuple[bool, bool]:
    """From ``pos`` inside a string (``escaped``: just after a backslash): whether the
    string closes in ``text``, and if not, whether ``text`` ends right after a backslash."""
    if escaped:
        if pos >= len(text):
            return False, True
        pos += 1
    while (found := _STRING_STOP.search(text, pos)) is not None:
        if found.group() == '"':
            return True, False
        pos = found.end() + 1  # the escaped character
        if pos > len(text):
            return False, True
    return False, False


class LiveCall:
    """A started call the client is shown while its arguments stream: each completed
    member may sharpen its title and locations (``write_file`` -> "Write src/app.py")."""

    __slots__ = ("_args", "_ctx", "_shown", "_tool", "tool_call_id")

    def __init__(self, tool_call_id: str, tool: Tool, ctx: ToolContext) -> None:
        self.tool_call_id = tool_call_id
        self._tool = tool
        self._ctx = ctx
        self._args = StreamedArguments()
        self._shown: tuple[str, tuple[t.ToolCallLocation, ...]] | None = None

    def feed(self, piece: str) -> t.ToolCallUpdateSessionUpdate | None:
        """The update to send after ``piece`` (``None``: nothing new to show)."""
        if not self._args.feed(piece):
            return None
        info = self._tool.describe_partial(self._args.members, self._ctx)
        if info is None or (info.title, info.locations) == self._shown:
            return None
        self._shown = (info.title, info.locations)
        update = t.ToolCallUpdateSessionUpdate(tool_call_id=self.tool_call_id, title=info.title)
        if info.locations:
            update.locations = list(info.locations)
        return update
