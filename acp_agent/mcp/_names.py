"""Names the hub hands out: server keys, namespaced tool names, slash-command names, and
the parsing of a slash command's free text into prompt arguments."""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence

#: Providers accept tool names matching ``^[A-Za-z0-9_-]{1,64}$`` (OpenAI and Anthropic).
MAX_TOOL_NAME = 64
TOOL_PREFIX = "mcp__"
COMMAND_PREFIX = "mcp:"

_NOT_TOOL_CHAR = re.compile(r"[^A-Za-z0-9_-]+")
_NOT_COMMAND_CHAR = re.compile(r"[^A-Za-z0-9_.-]+")


def sanitize(name: str, *, command: bool = False) -> str:
    """``name`` with every run of disallowed characters replaced by ``_``."""
    pattern = _NOT_COMMAND_CHAR if command else _NOT_TOOL_CHAR
    return pattern.sub("_", name).strip("_") or "x"


class Namer:
    """Hands out unique names within one hub, stable for the hub's lifetime: the same
    ``(scope, original)`` always gets the same name back."""

    def __init__(self, *, limit: int | None = None) -> None:
        self._limit = limit
        self._given: dict[tuple[str, ...], str] = {}
        self._used: set[str] = set()

    def name(self, key: tuple[str, ...], wanted: str) -> str:
        given = self._given.get(key)
        if given is not None:
            return given
        candidate = self._fit(wanted, "")
        n = 1
        while candidate in self._used:
            n += 1
            candidate = self._fit(wanted, f"_{n}")
        self._given[key] = candidate
        self._used.add(candidate)
        return candidate

    def _fit(self, wanted: str, suffix: str) -> str:
        limit = self._limit
        if limit is None or len(wanted) + len(suffix) <= limit:
            return wanted + suffix
        digest = hashlib.sha1(wanted.encode()).hexdigest()[:6]
        tail = f"_{digest}{suffix}"
        return wanted[: limit - len(tail)] + tail


def tool_name(namer: Namer, server_key: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, sanitized to ``[A-Za-z0-9_-]``, at most 64 characters."""
    return namer.name(("tool", server_key, tool), f"{TOOL_PREFIX}{server_key}__{sanitize(tool)}")


def command_name(namer: Namer, server_key: str, prompt: str) -> str:
    """``mcp:<server>:<prompt>``: no spaces, usable as an ACP command name."""
    wanted = f"{COMMAND_PREFIX}{server_key}:{sanitize(prompt, command=True)}"
    return namer.name(("prompt", server_key, prompt), wanted)


def prompt_arguments(text: str, names: Sequence[str]) -> dict[str, str]:
    """Map a slash command's free text onto a prompt's arguments.

    With one argument the whole text is its value. With several, ``key=value`` pairs
    (shell quoting allowed, e.g. ``title="two words"``) fill the named arguments; text
    that names none of them goes to the first argument. Empty text gives no arguments.
    """
    text = text.strip()
    if not text or not names:
        return {}
    if len(names) == 1:
        return {names[0]: text}
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    pairs: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in names:
            return {names[0]: text}
        pairs[key] = value
    return pairs
