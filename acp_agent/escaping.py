"""Text the model or the project chose, made safe to show: :func:`escaped`.

A title the user reads before approving a call (``Write ok.txt\\nAllow? yes``), a file
name with a right-to-left override (``invoice\\u202etxt.sh`` shows as ``invoicehs.txt``)
or a terminal escape (``\\x1b[2J`` clears the screen) can redraw a question or disguise
what it is about. Every such text is passed through :func:`escaped` before it is shown:
tool call titles and locations, permission questions and their options (``toolcall``,
``streamargs``, ``permissions``), notices naming project files, and the terminal front
end's rendering of whatever an agent sends (``human``). C0 and C1 control characters,
DEL, and the Unicode bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
U+2066–U+2069) are shown escaped (``\\n``, ``\\x1b``, ``\\u202e``); everything else
is left as it is. Only what is shown changes: a tool operates on the path it was given.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .protocol import types as t

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _table(keep: str) -> dict[int, str]:
    table: dict[int, str] = {}
    for code in (*range(0x20), *range(0x7F, 0xA0)):
        char = chr(code)
        if char not in keep:
            table[code] = _NAMED.get(char, f"\\x{code:02x}")
    for code in _BIDI:
        table[code] = f"\\u{code:04x}"
    return table


_LINE = _table("")
_LINES = _table("\n\t")


def escaped(text: str, *, lines: bool = False) -> str:
    """``text`` with control and bidi characters escaped; with ``lines``, line breaks
    (``\r\n`` shown as one) and tabs are kept (a multi-line command, a message, a
    command's output shown as such)."""
    if lines:
        return text.replace("\r\n", "\n").translate(_LINES)
    return text.translate(_LINE)


def escaped_locations(locations: Iterable[t.ToolCallLocation]) -> list[t.ToolCallLocation]:
    """Tool call locations as shown: each path through :func:`escaped`."""
    shown = [(loc, escaped(loc.path)) for loc in locations]
    return [loc if p == loc.path else msgspec.structs.replace(loc, path=p) for loc, p in shown]
