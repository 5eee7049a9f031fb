"""What one tool result may cost the model's context, and how it is cut when it is more.

Every output limit of the built-in tools lives here, with the marker that stands where
something was cut: it says what was left out and how to get it. Sizes are UTF-8 bytes of
what the model reads; at ~4 bytes a token (code, English), 50,000 bytes ≈ 12.5 k tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# ---------------------------------------------------------------------- the limits

#: read_file: lines of one read (unless ``limit`` asks for fewer or more).
READ_MAX_LINES = 2000
#: read_file: characters of one line (a minified file is one line).
LINE_MAX_CHARS = 2000
#: read_file: bytes of one read, numbering included (≈ 12.5 k tokens).
READ_MAX_BYTES = 50_000
#: run_command: bytes of output, head and tail kept (≈ 7.5 k tokens).
COMMAND_MAX_BYTES = 30_000
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


# ---------------------------------------------------------------------- command output

REDIRECT_HINT = ("To see all of it, redirect the output to a file (`cmd > out.log 2>&1`) "
                 "and read it in parts with read_file (offset/limit) or grep.")


#: How far the cut in the middle of command output moves to reach a line end.
SNAP = 1000


class HeadTail:
    """Keeps the head and the tail of a byte stream within ``limit`` bytes."""

    def __init__(self, limit: int = COMMAND_MAX_BYTES) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.newlines = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.newlines += data.count(b"\n")
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def render(self) -> tuple[str, bool]:
        """The text kept; when something was cut, the marker stands in its place (the cut
        moved to a line end when one is within SNAP bytes)."""
        if self.total <= len(self.head) + len(self.tail):
            return (self.head + self.tail).decode("utf-8", "replace"), False
        head, tail = bytes(self.head), bytes(self.tail)
        if (end := head.rfind(b"\n", len(head) - SNAP)) >= 0:
            head = head[: end + 1]
        if (start := tail.find(b"\n", 0, SNAP)) >= 0:
            tail = tail[start + 1 :]
        omitted = self.total - len(head) - len(tail)
        lines = self.newlines - head.count(b"\n") - tail.count(b"\n")
        spans = f" ({plural(lines, 'line')})" if lines else ""
        marker = f"[... {size(omitted)}{spans} of output omitted. {REDIRECT_HINT}]"
        text = head.decode("utf-8", "replace").rstrip("\ufffd")
        text += ("" if text.endswith("\n") or not text else "\n") + marker + "\n"
        return text + tail.decode("utf-8", "replace").lstrip("\ufffd"), True


def bound_output(text: str, *, editor_cut: bool = False) -> tuple[str, bool]:
    """Command output for the model within COMMAND_MAX_BYTES; ``editor_cut``: the editor's
    terminal dropped its beginning (``terminal/output`` said ``truncated``)."""
    capture = HeadTail()
    capture.feed(text.encode("utf-8", "replace"))
    out, cut = capture.render() if capture.total > COMMAND_MAX_BYTES else (text, False)
    if editor_cut:
        out = (f"[The editor's terminal cut the beginning of the output (it keeps the last "
               f"{COMMAND_MAX_BYTES:,} bytes). {REDIRECT_HINT}]\n{out}")
    return out, cut or editor_cut


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
