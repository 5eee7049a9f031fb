"""What one tool result may cost the model's context, and how it is cut when it is more.

Every output limit of the built-in tools lives here, with the marker that stands where
something was cut: it says what was left out and how to get it. Sizes are UTF-8 bytes of
what the model reads; at ~4 bytes a token (code, English), 50,000 bytes ≈ 12.5 k tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# ---------------------------------------------------------------------- the limits

#: read_file: lines of one read (unless ``limit`` asks for fewer or more).
READ_MAX_LINES = 2000
#: read_file: characters of one line (a minified file is one line).
LINE_MAX_CHARS = 2000
#: read_file: bytes of one read, numbering included (≈ 12.5 k tokens).
READ_MAX_BYTES = 50_000
#: run_command: tokens of output the model reads (estimated), head and tail kept; the
#: whole output is saved to a file (``output``).
COMMAND_MAX_TOKENS = 6_000
#: run_command in the editor's terminal: bytes of output asked of the editor (it keeps
#: the last ones); cut to COMMAND_MAX_TOKENS on our side, the rest saved.
TERMINAL_OUTPUT_BYTES = 4 * 1024 * 1024
#: grep: output lines shown (its default head_limit), and characters of each line.
GREP_MAX_MATCHES = 200
GREP_LINE_CHARS = 250
#: grep: matches counted (for the total it reports) before it stops searching.
GREP_COUNT_LIMIT = 10_000
#: grep: matches that become ACP locations (the editor's follow-along).
GREP_MAX_LOCATIONS = 20
#: glob: paths shown; list_directory: entries shown.
GLOB_MAX_PATHS = 500
LIST_MAX_ENTRIES = 500
#: grep, glob, list_directory: bytes of one result (≈ 5 k tokens).
SEARCH_MAX_BYTES = 20_000
#: Files glob takes from ripgrep's listing before it gives up (keeps a search of ``/`` finite).
MAX_WALK_ENTRIES = 200_000
#: read_file on an image: the largest one sent (base64 makes it 4/3: 5 MB, Anthropic's cap).
IMAGE_MAX_BYTES = 3_750_000
#: edit_file: lines of the snippet after an edit and of a candidate region in an error.
EDIT_SNIPPET_LINES = 20


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 line``, ``1,337 lines``."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def size(n: int) -> str:
    return plural(n, "byte")


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


_PIECES = re.compile(r"[^\W\d_]+|\d+|\n|[ \t]+|[^\w\s]|_|\s")


def estimate_tokens(text: str) -> int:
    """Roughly the tokens ``text`` costs a GPT or Claude tokenizer: a run of letters one
    token per 4 characters, digits one per 3 (the tokenizers split numbers in groups of
    three), each newline, punctuation character and run of other whitespace one (a single
    space joins the word after it). No tokenizer is shipped: this decides cuts only."""
    tokens = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isdigit():
            tokens += -(-len(piece) // 3)
        elif first.isalpha():
            tokens += -(-len(piece) // 4)
        elif piece != " ":
            tokens += 1
    return tokens


# ---------------------------------------------------------------------- lines


def cut_line(line: str, limit: int) -> tuple[str, bool]:
    """``line`` cut to ``limit`` characters, the cut marked ``… [+N chars]``."""
    if len(line) <= limit:
        return line, False
    return f"{line[:limit]}… [+{len(line) - limit:,} chars]", True


def numbered(n: int, line: str) -> str:
    """One line as read_file shows it: the number right-aligned in 6, a tab, the text."""
    return f"{n:6}\t{line.rstrip(chr(13))}"


@dataclass(slots=True)
class Window:
    """The lines of one read, numbered, within the read budget."""

    entries: list[str]
    first: int
    last: int
    """The last line shown (``first - 1`` when none)."""
    more: bool = False
    """Lines follow the last one shown."""
    full: bool = False
    """Stopped for READ_MAX_BYTES (not for the line limit)."""
    long_lines: int = 0
    """Lines cut at LINE_MAX_CHARS."""

    @property
    def text(self) -> str:
        return "\n".join(self.entries)


def read_window(lines: Iterable[str], first: int, limit: int | None = None) -> Window:
    """Number ``lines`` (the file from line ``first`` on) until ``limit`` lines
    (default READ_MAX_LINES) or READ_MAX_BYTES; ``more`` says whether any line is left."""
    limit = READ_MAX_LINES if limit is None else limit
    window = Window([], first, first - 1)
    used = 0
    it: Iterator[str] = iter(lines)
    for line in it:
        if len(window.entries) >= limit:
            window.more = True
            return window
        text, cut = cut_line(line.rstrip("\r\n"), LINE_MAX_CHARS)
        entry = numbered(window.last + 1, text)
        cost = utf8_len(entry) + 1
        if used + cost > READ_MAX_BYTES:
            window.more = window.full = True
            return window
        window.entries.append(entry)
        window.long_lines += cut
        window.last += 1
        used += cost
    return window


def read_markers(window: Window, total: int | None) -> list[str]:
    """The notes after a read: where it stopped and how to continue; cut lines."""
    notes: list[str] = []
    of = f" of {total:,}" if total is not None else ""
    if window.more:
        first, last = window.first, window.last
        span = f"Lines {first}-{last}" if last > first else f"Line {first}"
        why = f" (one read returns at most {READ_MAX_BYTES:,} bytes)" if window.full else ""
        notes.append(f"[{span}{of} shown{why}. Call read_file with offset={last + 1} to "
                     "continue.]")
    if window.long_lines:
        notes.append(f"[{plural(window.long_lines, 'line')} longer than {LINE_MAX_CHARS:,} "
                     f"characters cut where marked `… [+N chars]`; run_command with "
                     f"`cut -c {LINE_MAX_CHARS + 1}-` shows the rest.]")
    return notes


# ---------------------------------------------------------------------- listings


def fit(lines: Iterable[str], max_items: int) -> list[str]:
    """The first ``lines`` within ``max_items`` and SEARCH_MAX_BYTES."""
    out: list[str] = []
    used = 0
    for line in lines:
        used += utf8_len(line) + 1
        if len(out) >= max_items or used > SEARCH_MAX_BYTES:
            break
        out.append(line)
    return out


def glob_marker(shown: int, total: int) -> str | None:
    if shown >= total:
        return None
    return f"[Showing {shown:,} of {total:,} paths; narrow the pattern or `path`.]"


def list_marker(shown: int, total: int) -> str | None:
    if shown >= total:
        return None
    return f"[Showing {shown:,} of {total:,} entries; use glob to find specific names.]"


def walk_marker(visited: int) -> str:
    return (f"[The search stopped after visiting {visited:,} entries, so results are "
            "incomplete; narrow `path`.]")
