"""Where edit_file's ``old_string`` is, and what the file becomes.

Matching goes from strict to lenient, as codex's patch matching does: the exact text
(also with the file's CRLF line endings); then line by line ignoring trailing whitespace;
then ignoring leading and trailing whitespace. A lenient match is applied only when it is
the only one, with ``new_string`` re-indented by the same shift as the matched lines.
When nothing matches, the error shows the most similar lines of the file, numbered, so
the model can correct ``old_string`` instead of guessing again.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ToolError
from .budget import EDIT_SNIPPET_LINES, cut_line, numbered
from .textcodec import ESCAPED, visible

#: Similarity (0..1) below which no candidate is shown.
MIN_SIMILARITY = 0.5
#: Runs of lines compared in full when looking for the most similar one.
CANDIDATES = 20
#: Words in more lines than this do not vote for where old_string was meant to be.
MAX_POSTINGS = 5000
#: Characters of a candidate line shown in an error.
CANDIDATE_LINE_CHARS = 300
#: Line numbers listed for ambiguous matches.
MAX_LISTED = 10

_LINE_PREFIX = re.compile(r"^ *\d+\t")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Edit:
    content: str
    """The file's new text."""
    count: int
    line: int
    """First line of the first replacement."""
    new_lines: int
    """Lines the (first) replacement spans."""
    fuzzy: str = ""
    """How a lenient match was found ("ignoring trailing whitespace", ...), else ``""``."""
    note: str = ""
    """What the model should know about a lenient match."""


def apply(content: str, old: str, new: str, *, replace_all: bool, name: str) -> Edit:
    """Replace ``old`` with ``new`` in ``content``; raises :class:`ToolError` with what
    to do when ``old`` is not found or not unique."""
    found = _occurrences(content, old)
    if not found and "\r\n" in content and "\n" in old and "\r\n" not in old:
        crlf = old.replace("\n", "\r\n")  # the model writes \n; the file uses \r\n
        found = _occurrences(content, crlf)
        if found:
            old, new = crlf, new.replace("\r\n", "\n").replace("\n", "\r\n")
    if found:
        if len(found) > 1 and not replace_all:
            lines = _line_numbers(content, found[:MAX_LISTED])
            raise ToolError(
                f"old_string occurs {len(found)} times in {name} (at lines "
                f"{_listed(lines, len(found))}). Include more surrounding lines to make it "
                "unique, or set replace_all to true.")
        used = found if replace_all else found[:1]
        parts, last = [], 0
        for index in used:
            parts += [content[last:index], new]
            last = index + len(old)
        parts.append(content[last:])
        first = content.count("\n", 0, used[0]) + 1
        return Edit("".join(parts), len(used), first, new.count("\n") + 1)
    return _lenient(content, old, new, name)


def _occurrences(content: str, old: str) -> list[int]:
    """Start of each non-overlapping occurrence (as ``str.replace`` sees them)."""
    out: list[int] = []
    index = content.find(old)
    while index >= 0:
        out.append(index)
        index = content.find(old, index + len(old))
    return out


def _line_numbers(content: str, offsets: list[int]) -> list[int]:
    """The 1-based line of each of the (ascending) ``offsets``."""
    out, line, at = [], 1, 0
    for offset in offsets:
        line += content.count("\n", at, offset)
        at = offset
        out.append(line)
    return out


def _listed(items: list[str] | list[int], total: int) -> str:
    shown = ", ".join(str(x) for x in items[:MAX_LISTED])
    return shown + (f" and {total - MAX_LISTED} more" if total > MAX_LISTED else "")


# ---------------------------------------------------------------------- lenient matches

_PASSES: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("ignoring trailing whitespace", str.rstrip),
    ("ignoring indentation and trailing whitespace", str.strip),
)


def _lines(content: str) -> list[str]:
    """The file's lines without their ``\\n`` (a final newline adds no line)."""
    lines = content.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _lenient(content: str, old: str, new: str, name: str) -> Edit:
    lines = _lines(content)
    pattern = (old[:-1] if old.endswith("\n") else old).split("\n")
    if any(p.strip() for p in pattern):
        for how, key in _PASSES:
            keyed, wanted = [key(x) for x in lines], [key(p) for p in pattern]
            n = len(wanted)
            starts = [i for i in range(len(lines) - n + 1)
                      if keyed[i] == wanted[0] and keyed[i : i + n] == wanted]
            if len(starts) > 1:
                spans = [f"{i + 1}-{i + n}" if n > 1 else str(i + 1) for i in starts]
                raise ToolError(
                    f"old_string is not in {name} exactly; {how} it matches {len(starts)} "
                    f"places (lines {_listed(spans, len(spans))}). A lenient match is applied "
                    "only when it is unique: copy the exact text of the place you mean, with "
                    "enough surrounding lines to make it unique.")
            if starts:
                return _replace_lines(content, lines, starts[0], pattern, old, new, how, name)
    raise ToolError(_not_found(lines, pattern, old, content, name))


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _common_indent(lines: list[str]) -> str:
    """The leading whitespace all ``lines`` share."""
    indents = [_indent(x) for x in lines]
    common = min(indents, key=len, default="")
    while common and not all(i.startswith(common) for i in indents):
        common = common[:-1]
    return common


def _replace_lines(content: str, lines: list[str], start: int, pattern: list[str], old: str,
                   new: str, how: str, name: str) -> Edit:  # fmt: skip
    end = start + len(pattern)  # exclusive
    matched = lines[start:end]
    pairs = [(p, f) for p, f in zip(pattern, matched, strict=True) if p.strip()]
    # A first line copied without its indentation (old_string may start mid-line) says
    # nothing about the shift: the other lines do, and the first gets the file's own.
    first_indent = None
    if len(pairs) > 1 and pattern[0].strip() and not _indent(pattern[0]):
        first_indent, pairs = _indent(matched[0]), pairs[1:]
    old_base = _common_indent([p for p, _ in pairs])
    file_base = _common_indent([f for _, f in pairs])
    if any(_indent(f) != file_base + _indent(p)[len(old_base):] for p, f in pairs):
        raise ToolError(
            f"old_string is not in {name} exactly; {how} it matches lines {start + 1}-{end}, "
            "but its indentation differs from the file's unevenly (tabs and spaces?), so "
            "new_string cannot be re-indented safely. Copy these lines exactly:\n"
            + _numbered_region(lines, start, end))
    eol = "\r\n" if matched[0].endswith("\r") else "\n"
    out: list[str] = []
    for line in new.replace("\r\n", "\n").split("\n"):
        if first_indent is not None and not out and not _indent(line):
            out.append(first_indent + line)
        elif not line.strip() or old_base == file_base:
            out.append(line)
        elif line.startswith(old_base):
            out.append(file_base + line[len(old_base):])
        else:
            out.append(file_base + line.lstrip())
    replacement = eol.join(out)
    begin = sum(len(x) + 1 for x in lines[:start])
    last = matched[-1]
    stop = begin + sum(len(x) + 1 for x in matched[:-1]) + len(last.rstrip("\r"))
    if old.endswith("\n"):  # the line end after the matched lines is part of the match
        terminator = len(last) - len(last.rstrip("\r")) + 1
        if stop + terminator <= len(content):
            stop += terminator
        elif replacement.endswith(eol):  # no newline at the end of the file: keep it so
            replacement = replacement[: -len(eol)]
    span = f"lines {start + 1}-{end}" if end > start + 1 else f"line {start + 1}"
    note = f"old_string matched {span} only {how}"
    if old_base != file_base or first_indent:
        note += "; new_string was re-indented the same way"
    return Edit(content[:begin] + replacement + content[stop:], 1, start + 1,
                replacement.count("\n") + 1, how, note + ".")


# ---------------------------------------------------------------------- no match


def _numbered_region(lines: list[str], start: int, end: int) -> str:
    stop = min(end, start + EDIT_SNIPPET_LINES)
    out = [numbered(n + 1, cut_line(visible(lines[n]).rstrip("\r"),
                                    CANDIDATE_LINE_CHARS)[0]) for n in range(start, stop)]
    if stop < end:
        out.append(f"[... lines {stop + 1}-{end} not shown]")
    return "\n".join(out)


def nearest(lines: list[str], pattern: list[str]) -> tuple[int, float]:
    """The start of the run of ``len(pattern)`` lines most similar to ``pattern``
    (whitespace at the ends of lines ignored), and its similarity (0..1).

    Runs are voted for by the words they share with ``pattern`` at the same offset, rare
    words weighing more; the best CANDIDATES of them are compared in full. Linear in
    the file, so a large file answers quickly."""
    n = max(1, min(len(pattern), len(lines)))
    last_start = len(lines) - n
    wanted: dict[str, list[int]] = {}
    for i, p in enumerate(pattern):
        for word in set(_WORD.findall(p)):
            wanted.setdefault(word, []).append(i)
    postings: dict[str, list[int]] = {}
    for j, line in enumerate(lines):
        for word in set(_WORD.findall(line)):
            if word in wanted:
                postings.setdefault(word, []).append(j)
    votes: defaultdict[int, float] = defaultdict(float)
    for word, where in postings.items():
        if len(where) > MAX_POSTINGS:
            continue
        weight = 1 / len(where)  # a rare word says more about where
        for i in wanted[word]:
            for j in where:
                votes[min(max(j - i, 0), last_start)] += weight
    stripped = [x.strip() for x in lines]
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2("\n".join(p.strip() for p in pattern))
    best, best_at = 0.0, 0
    for start in heapq.nlargest(CANDIDATES, votes, key=votes.__getitem__):
        matcher.set_seq1("\n".join(stripped[start : start + n]))
        if matcher.quick_ratio() > best and (ratio := matcher.ratio()) > best:
            best, best_at = ratio, start
    return best_at, best


def _not_found(lines: list[str], pattern: list[str], old: str, content: str, name: str) -> str:
    message = f"old_string was not found in {name}."
    hints: list[str] = []
    filled = [p for p in pattern if p.strip()]
    if filled and all(_LINE_PREFIX.match(p) for p in filled):
        hints.append("old_string seems to include read_file's line-number prefixes "
                     "(`     5<TAB>`); leave them out.")
    if "\ufffd" in old and ESCAPED.search(content):
        hints.append("The file has bytes that are not UTF-8 (shown as �); old_string cannot "
                     "match them: choose old_string around them.")
    start, score = nearest(lines, pattern) if lines else (0, 0.0)
    if score >= MIN_SIMILARITY:
        end = min(len(lines), start + len(pattern))
        span = f"lines {start + 1}-{end}" if end > start + 1 else f"line {start + 1}"
        message += (f" The most similar text is at {span}:\n"
                    f"{_numbered_region(lines, start, end)}\n"
                    "Copy the exact text from there (without the line-number prefix) into "
                    "old_string.")
    else:
        message += (" Nothing similar is in the file: read it again to see its current "
                    "content.")
    return " ".join([message, *hints])
