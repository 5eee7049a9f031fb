"""The project's instruction files: every ``AGENTS.md`` from the repository root down to
the session's directory (as codex reads them), and those further down shown to the model
as its work enters their directories (as Claude Code does).

**The chain** (:func:`chain`, in the system prompt): each directory from the repository
root (the session's directory outside a repository) down to the session's directory
gives its ``AGENTS.md``, else its ``CLAUDE.md``; root first. Together they get at most
:data:`MAX_TOTAL_CHARS` characters (each at most ``MAX_INSTRUCTIONS_CHARS``): the files
nearest the session's directory are the most specific, so when the budget runs out the
ones nearest the root are cut first, each cut saying where the rest is.

**Nested files** (:class:`Nested`): an ``AGENTS.md`` (else ``CLAUDE.md``) in a directory
below the session's directory is made known the first time a tool call touches a path
under it: its text is attached to that call's result, in a ``<system-reminder>``, once
per session.

Every file is read through ``projectfiles.read_project_text``: inside the session's roots
(one above them, up to the repository root, exactly where it was found), never through a
link leading elsewhere; a file refused is reported, never read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from .projectfiles import ProjectText, Refused, read_project_text

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
#: One file at most (characters), and at most this much of it is read (bytes).
MAX_INSTRUCTIONS_CHARS = 16_000
MAX_INSTRUCTIONS_BYTES = 4 * MAX_INSTRUCTIONS_CHARS
#: The chain's files together at most.
MAX_TOTAL_CHARS = 32_000
#: A file that would get less than this of what is left is left out (with a note).
MIN_SHARE = 500


def instruction_file(directory: str) -> str | None:
    """The directory's ``AGENTS.md``, else its ``CLAUDE.md``."""
    for name in INSTRUCTION_FILES:
        path = os.path.join(directory, name)
        if os.path.lexists(path):
            return path
    return None


def _directories(cwd: str, top: str) -> list[str]:
    """``top`` down to ``cwd`` (``cwd`` alone when it is not under ``top``)."""
    here, top = os.path.abspath(cwd), os.path.abspath(top)
    chain = [here]
    while here != top and os.path.dirname(here) != here:
        here = os.path.dirname(here)
        chain.append(here)
    if chain[-1] != top:
        return [os.path.abspath(cwd)]
    return chain[::-1]


def chain(
    cwd: str, root: str | None, roots: Sequence[str]
) -> tuple[list[tuple[str, str]], list[Refused]]:
    """The chain's files, root first, as (path, text within the budget)."""
    read: list[ProjectText] = []
    refused: list[Refused] = []
    for directory in _directories(cwd, root or cwd):
        path = instruction_file(directory)
        if path is None:
            continue
        got = read_project_text(path, [*roots, path], max_bytes=MAX_INSTRUCTIONS_BYTES)
        if isinstance(got, Refused):
            refused.append(got)
        else:
            read.append(got)
    left = MAX_TOTAL_CHARS
    shares: dict[str, str] = {}
    for got in reversed(read):  # the nearest first: the most specific
        share = min(MAX_INSTRUCTIONS_CHARS, left)
        text = bounded(got, share) if share >= MIN_SHARE else (
            f"[Not included: the instructions budget ({MAX_TOTAL_CHARS:,} characters) is "
            f"spent on the files nearer the workspace. Read {got.path} if it matters.]")
        shares[got.path] = text
        left = max(0, left - len(text))
    return [(got.path, shares[got.path]) for got in read], refused


def bounded(got: ProjectText, limit: int = MAX_INSTRUCTIONS_CHARS) -> str:
    """A file's text within ``limit`` characters, a cut saying where the rest is."""
    text = got.text
    if got.cut or len(text) > limit:
        text = (text[:limit].rstrip()
                + f"\n\n[Cut at {limit:,} characters; read {got.path} for the rest.]")
    return text.strip()


@dataclass
class Nested:
    """A session's instruction files below its directory, each told once."""

    cwd: str
    roots: Sequence[str]
    told: set[str] = field(default_factory=set)
    """The directories whose file was looked at (told, refused or absent)."""

    def for_paths(self, paths: Sequence[str]) -> tuple[list[tuple[str, str]], list[Refused]]:
        """The files not told yet in the directories from below the session's directory
        down to each of ``paths`` (real paths of files or directories), outermost first;
        they are told from now on (a worker thread: it reads files)."""
        found: list[tuple[str, str]] = []
        refused: list[Refused] = []
        top = os.path.realpath(self.cwd)
        for path in paths:
            start = path if os.path.isdir(path) else os.path.dirname(path)
            if not start.startswith(top.rstrip(os.sep) + os.sep):
                continue  # the session's own directory and those above are in the chain
            for directory in _directories(start, top)[1:]:
                if directory in self.told:
                    continue
                self.told.add(directory)
                file = instruction_file(directory)
                if file is None:
                    continue
                got = read_project_text(file, self.roots, max_bytes=MAX_INSTRUCTIONS_BYTES)
                if isinstance(got, Refused):
                    refused.append(got)
                else:
                    found.append((file, bounded(got)))
        return found, refused


def attachment(files: list[tuple[str, str]], cwd: str) -> str:
    """Nested files as the text attached to a tool result."""
    parts = []
    for path, text in files:
        shown = os.path.relpath(path, cwd)
        scope = os.path.relpath(os.path.dirname(path), cwd)
        parts.append(f"<system-reminder>Instructions from {shown}, for the files under "
                     f"{scope}/ (they take precedence there):\n\n{text}</system-reminder>")
    return "\n\n".join(parts)
