"""A conversation's history as a wire format sends it, kept between its requests: a
request costs its new messages, not the whole history.

A session owns one :class:`HistoryCache` and hands it to the providers with every
request (``ModelRequest.history_cache``). A provider keeps in it, per wire format (a key:
``"chat"``, ``"messages"``, or ``"responses:<model>"`` for the reasoning items only that
model reads), an :class:`Encoded`: the messages it last converted, split into *groups*,
each group's vendor messages and their JSON. A format says where a group starts (a
message whose conversion depends on nothing before it: for Chat Completions any message
but a tool result, for Messages an assistant turn that is sent); the groups' conversions
laid end to end are the conversion of the whole history.

Nothing tells the cache what changed. A request's messages are compared with the ones it
kept (list equality: identity first, at C speed; ~13 µs for 2,000 messages); the groups
before the first difference are kept, save one a later message may still join (tool
results join their turn, a prompt joins the results before it), and the rest is
converted again. A compaction, stubs, a truncation, a fork or a load end up as a
difference found where it is; a model switch uses another format's entry. The result is
the from-scratch conversion, byte for byte (``tests/test_history_cache.py`` checks it
over random histories and changes). The cost: a copy of the history's JSON per session
and format in memory (two formats at most are kept).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

import msgspec

from ..conversation import Message, message_chars

Convert = Callable[[list[Message]], list[dict[str, Any]]]
"""A wire format's conversion of messages (a slice of a history) to its own."""

_encode = msgspec.json.Encoder().encode
#: Formats kept per conversation (a model switch and back costs nothing).
KEEP_FORMATS = 2


def common_prefix(kept: list[Message], messages: list[Message]) -> int:
    """How many first messages ``messages`` shares with ``kept`` (by value)."""
    n = min(len(kept), len(messages))
    if (messages[:n] == kept) if n == len(kept) else (kept[:n] == messages):
        return n  # the usual case: one comparison at C speed
    return next(i for i in range(n) if kept[i] is not messages[i] and kept[i] != messages[i])


class Encoded:
    """One wire format's conversion of a conversation, group by group (see the module)."""

    __slots__ = ("_convert", "_ends", "_first", "_json", "_messages", "_starts", "_vendor")

    def __init__(self, convert: Convert, starts: Callable[[Message], bool]) -> None:
        self._convert = convert
        self._starts = starts
        self._messages: list[Message] = []
        self._first: list[int] = []
        """Each group's first message."""
        self._vendor: list[list[dict[str, Any]]] = []
        """Each group's vendor messages (never changed: marks are made on copies)."""
        self._ends: list[int] = []
        """Where each group's JSON ends in :attr:`_json`."""
        self._json = bytearray()
        """Every vendor message encoded, each followed by a comma."""

    def update(self, messages: list[Message]) -> None:
        """Bring the conversion up to ``messages``."""
        same = common_prefix(self._messages, messages)
        if same == len(messages) == len(self._messages):
            return
        # final: the groups another group follows within the common part
        kept = max(0, bisect_left(self._first, same) - 1)
        start = self._first[kept] if kept < len(self._first) else 0
        del self._first[kept:], self._vendor[kept:], self._ends[kept:]
        del self._json[self._ends[-1] if self._ends else 0 :]
        self._messages = list(messages)
        cut = start
        for i in range(start + 1, len(messages) + 1):
            if i == len(messages) or self._starts(messages[i]):
                self._add(cut, messages[cut:i])
                cut = i

    def _add(self, first: int, group: list[Message]) -> None:
        vendor = self._convert(group)
        self._first.append(first)
        self._vendor.append(vendor)
        if vendor:
            self._json += _encode(vendor)[1:-1]
            self._json += b","
        self._ends.append(len(self._json))

    @property
    def groups(self) -> int:
        return len(self._first)

    def vendor(self, first_group: int = 0) -> list[dict[str, Any]]:
        """The vendor messages of the groups from ``first_group`` on (shared: copy
        before changing one)."""
        return [m for group in self._vendor[first_group:] for m in group]

    def tail(self, enough: Callable[[list[dict[str, Any]]], bool]) -> int:
        """The latest group such that the vendor messages from it on are ``enough``
        (0 when none is)."""
        messages: list[dict[str, Any]] = []
        for g in range(len(self._vendor) - 1, 0, -1):
            messages[:0] = self._vendor[g]
            if enough(messages):
                return g
        return 0

    def array(self, end_group: int | None = None, *, head: bytes = b"", more: bytes = b"") -> bytes:
        """A JSON array: the elements of the encoded array ``head``, the vendor messages
        of the groups before ``end_group`` (all by default), the elements of ``more``."""
        end = len(self._json) if end_group is None else (
            self._ends[end_group - 1] if end_group > 0 else 0
        )  # fmt: skip
        with memoryview(self._json) as json:
            runs: list[bytes | memoryview] = []
            if len(head) > 2:
                runs.append(memoryview(head)[1:-1])
            if end:
                runs.append(json[: end - 1])  # without its last comma
            if len(more) > 2:
                runs.append(memoryview(more)[1:-1])
            if not runs:
                return b"[]"
            pieces: list[bytes | memoryview] = [b"["]
            for run in runs:
                pieces += (run, b",")
            pieces[-1] = b"]"
            return b"".join(pieces)


class _Tokens:
    """:func:`~acp_agent.conversation.estimate_tokens` of a history, kept the same way."""

    __slots__ = ("_messages", "_sums")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._sums: list[int] = [0]

    def chars(self, messages: list[Message]) -> int:
        same = common_prefix(self._messages, messages)
        if same < len(self._sums) - 1:
            del self._sums[same + 1 :]
        total = self._sums[-1]
        for message in messages[same:]:
            total += message_chars(message)
            self._sums.append(total)
        self._messages = list(messages)
        return total


class HistoryCache:
    """A conversation's (a session's) entries: one :class:`Encoded` per wire format, and
    its token estimate."""

    __slots__ = ("_formats", "_tokens")

    def __init__(self) -> None:
        self._formats: dict[str, Encoded] = {}
        self._tokens = _Tokens()

    def encoded(
        self, key: str, messages: list[Message], convert: Convert, starts: Callable[[Message], bool]
    ) -> Encoded:
        """The format ``key``'s conversion of ``messages`` (``convert`` a slice, group by
        group, starting where ``starts`` says)."""
        entry = self._formats.pop(key, None)
        if entry is None:
            entry = Encoded(convert, starts)
            while len(self._formats) >= KEEP_FORMATS:
                del self._formats[next(iter(self._formats))]
        self._formats[key] = entry  # the most recent last
        entry.update(messages)
        return entry

    def tokens(self, messages: list[Message], system: str = "") -> int:
        """``estimate_tokens(messages, system)``."""
        return max(1, (len(system) + self._tokens.chars(messages)) // 4)


def encoded(
    cache: HistoryCache | None,
    key: str,
    messages: list[Message],
    convert: Convert,
    starts: Callable[[Message], bool],
) -> Encoded:
    """The conversion of ``messages`` from ``cache``, or made now (no cache: a request
    of no conversation, a rehearsal)."""
    if cache is None:
        entry = Encoded(convert, starts)
        entry.update(messages)
        return entry
    return cache.encoded(key, messages, convert, starts)
