"""The patch format of ``apply_patch`` (the one OpenAI's GPT-5 and codex models are
trained on, from the codex CLI): parsed, then applied to text in memory.

    *** Begin Patch
    *** Add File: <path>          every line after it is "+<text>"
    *** Delete File: <path>
    *** Update File: <path>
    *** Move to: <new path>       (optional, right after Update File)
    @@ <a line above the change, e.g. `def greet():`>   (or a bare @@)
     <context line>
    -<removed line>
    +<added line>
    *** End of File               (optional: the hunk ends the file)
    *** End Patch

An update's hunks are found in order, each after the one before: its ``@@`` line (when
it has text) first, then its context and removed lines, exactly, else ignoring trailing
whitespace, else ignoring surrounding whitespace, else with typographic dashes, quotes
and spaces read as ASCII. A hunk that is not found fails the whole patch, with an error
naming the file, the hunk (its number and ``@@`` line) and the lines looked for; nothing
is written. Markers may carry surrounding whitespace; the patch may come wrapped in a
heredoc (``<<'EOF' ... EOF``), which is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
MOVE, EOF_MARK = "*** Move to: ", "*** End of File"


class PatchError(ValueError):
    """The patch cannot be parsed or applied; the message says where and what to do."""


@dataclass
class Hunk:
    headers: list[str]
    """The text after each ``@@`` before its lines (none for a bare ``@@``): lines found
    in turn, the change after the last (``@@ class A`` then ``@@ def m():``)."""
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_end: bool = False
    added: int = 0
    removed: int = 0

    def name(self, number: int) -> str:
        shown = " ".join(f"`@@ {h}`" for h in self.headers)
        return f"hunk {number}" + (f" ({shown})" if shown else "")


@dataclass
class FileOp:
    kind: str
    """``add``, ``delete`` or ``update``."""
    path: str
    move_to: str | None = None
    lines: list[str] = field(default_factory=list)
    """``add``: the new file's lines."""
    hunks: list[Hunk] = field(default_factory=list)


def parse(text: str) -> list[FileOp]:
    """The file operations of a patch; :class:`PatchError` names the offending line."""
    lines = _unwrapped(text.replace("\r\n", "\n").split("\n"))
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"a patch starts with `{BEGIN}` on its own line")
    try:
        end = next(i for i in range(len(lines) - 1, 0, -1) if lines[i].strip() == END)
    except StopIteration:
        raise PatchError(f"a patch ends with `{END}` on its own line") from None
    ops: list[FileOp] = []
    i = 1
    while i < end:
        line = lines[i]
        marker = line.strip()
        where = f"line {i + 1} of the patch"
        if marker.startswith(ADD.strip()):
            op = FileOp("add", _path(marker, ADD, where))
            i += 1
            while i < end and lines[i].startswith("+"):
                op.lines.append(lines[i][1:])
                i += 1
            ops.append(op)
        elif marker.startswith(DELETE.strip()):
            ops.append(FileOp("delete", _path(marker, DELETE, where)))
            i += 1
        elif marker.startswith(UPDATE.strip()):
            op = FileOp("update", _path(marker, UPDATE, where))
            i += 1
            if i < end and lines[i].strip().startswith(MOVE.strip()):
                op.move_to = _path(lines[i].strip(), MOVE, f"line {i + 1} of the patch")
                i += 1
            i = _hunks(lines, i, end, op)
            if not op.hunks and op.move_to is None:
                raise PatchError(f"{where}: `Update File: {op.path}` has no hunk (`@@` and "
                                 "the lines to change)")  # fmt: skip
            ops.append(op)
        elif not marker:
            i += 1
        else:
            raise PatchError(f"{where}: expected `*** Add File:`, `*** Delete File:` or "
                             f"`*** Update File:`, found {line[:80]!r}")  # fmt: skip
    if not ops:
        raise PatchError("the patch changes no file")
    return ops


def _unwrapped(lines: list[str]) -> list[str]:
    """Without a heredoc around it (``apply_patch <<'EOF'`` ... ``EOF``) or blank ends."""
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    if len(lines) >= 2 and "<<" in lines[0] and lines[0].strip() != BEGIN:
        lines = lines[1:-1] if lines[-1].strip() != END else lines[1:]
    return lines


def _path(marker: str, prefix: str, where: str) -> str:
    path = marker[len(prefix.strip()) :].strip()
    if not path:
        raise PatchError(f"{where}: `{prefix.strip()}` needs a path")
    return path


def _hunks(lines: list[str], i: int, end: int, op: FileOp) -> int:
    """Read the hunks of an update from line ``i``; returns where they stop."""
    hunk: Hunk | None = None
    while i < end:
        line = lines[i]
        marker = line.strip()
        if marker.startswith("*** ") and marker != EOF_MARK:
            break
        if marker.startswith("@@"):
            header = marker[2:].strip()
            if hunk is not None and not hunk.old and not hunk.new:  # one more @@ of it
                hunk.headers += [header] if header else []
            else:
                hunk = Hunk([header] if header else [])
                op.hunks.append(hunk)
        elif marker == EOF_MARK:
            if hunk is None:
                raise PatchError(f"line {i + 1} of the patch: `{EOF_MARK}` outside a hunk")
            hunk.at_end = True
        else:
            if hunk is None:  # lines before the first @@: a hunk without a header
                hunk = Hunk([])
                op.hunks.append(hunk)
            sign, text = (line[:1], line[1:]) if line else (" ", "")
            if sign == " ":
                hunk.old.append(text)
                hunk.new.append(text)
            elif sign == "-":
                hunk.old.append(text)
                hunk.removed += 1
            elif sign == "+":
                hunk.new.append(text)
                hunk.added += 1
            else:
                raise PatchError(
                    f"line {i + 1} of the patch (in {op.path}): a hunk line starts with "
                    f"' ' (context), '-' or '+', found {line[:80]!r}")  # fmt: skip
        i += 1
    for n, h in enumerate(op.hunks, 1):
        if not h.old and not h.new:
            raise PatchError(f"{op.path}, {h.name(n)}: empty (no lines to change)")
    return i


# ---------------------------------------------------------------------- applying

_ASCII = str.maketrans({
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f"
                    "\u205f\u3000", " "),
})  # fmt: skip
_LOOSER = (
    lambda s: s,
    str.rstrip,
    str.strip,
    lambda s: s.strip().translate(_ASCII),
)


def _seek(lines: list[str], wanted: list[str], start: int, at_end: bool) -> int | None:
    """Where ``wanted`` occurs in ``lines`` at or after ``start`` (at the end first when
    ``at_end``), each pass looser than the one before."""
    if not wanted:
        return start
    last = len(lines) - len(wanted)
    if last < 0:
        return None
    first = last if at_end and last >= start else start
    for same in _LOOSER:
        want = [same(w) for w in wanted]
        for i in range(first, last + 1):
            if all(same(lines[i + k]) == want[k] for k in range(len(want))):
                return i
    return None


def apply_hunks(text: str, op: FileOp) -> str:
    """``text`` (a file's content) with ``op``'s hunks applied; line endings kept (CRLF
    when the file has them), ending with a newline."""
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    edits: list[tuple[int, int, list[str]]] = []
    position = 0
    for n, hunk in enumerate(op.hunks, 1):
        for header in hunk.headers:
            found = _seek(lines, [header], position, False)
            if found is None:
                raise PatchError(f"{op.path}, {hunk.name(n)}: the line `{header}` was "
                                 f"not found{_after(position)}. {_HINT}")  # fmt: skip
            position = found + 1
        if not hunk.old:  # only additions: after the @@ line, else at the end
            edits.append((position if hunk.headers else len(lines), 0, hunk.new))
            continue
        old, new = hunk.old, hunk.new
        found = _seek(lines, old, position, hunk.at_end)
        if found is None and old and old[-1] == "":  # a trailing empty line the file lacks
            old, new = old[:-1], (new[:-1] if new and new[-1] == "" else new)
            found = _seek(lines, old, position, hunk.at_end)
        if found is None:
            shown = "\n".join(f"  {line}" for line in hunk.old[:12])
            more = f"\n  … ({len(hunk.old) - 12} more)" if len(hunk.old) > 12 else ""
            raise PatchError(
                f"{op.path}, {hunk.name(n)}: these lines (context and removed) were not "
                f"found{_after(position)}:\n{shown}{more}\n{_HINT}")  # fmt: skip
        edits.append((found, len(old), new))
        position = found + len(old)
    for at, length, new in reversed(edits):
        lines[at : at + length] = new
    return eol.join(lines) + eol if lines else ""


def _after(position: int) -> str:
    return f" after line {position}" if position else ""


_HINT = ("Nothing was changed. Read the file again and make the hunk's context and '-' "
         "lines match it exactly.")  # fmt: skip
