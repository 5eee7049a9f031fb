"""list_directory, glob and grep: local walks (ACP has no method for them), run in a
worker thread, bounded in output and in the number of entries visited."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from msgspec import Meta

from ..errors import ToolError
from ..protocol import types as t
from ._common import SKIP_DIRS, glob_regex, short, split_glob
from ._safe import open_checked
from .base import (
    Arguments,
    BuiltinTool,
    CallInfo,
    ToolContext,
    ToolKind,
    ToolOutput,
    within,
)
from .budget import (
    GLOB_MAX_PATHS,
    GREP_COUNT_LIMIT,
    GREP_LINE_CHARS,
    GREP_MAX_LOCATIONS,
    GREP_MAX_MATCHES,
    LIST_MAX_ENTRIES,
    MAX_WALK_ENTRIES,
    cut_line,
    fit,
    glob_marker,
    grep_marker,
    list_marker,
    plural,
    walk_marker,
)
from .textcodec import SNIFF_BYTES, decode, is_binary

#: Files larger than this are not searched.
MAX_GREP_FILE_BYTES = 10 * 1024 * 1024

R = TypeVar("R")


async def _in_thread(fn: Callable[..., R], *args: Any) -> R:
    """Run ``fn(stop, *args)`` in a thread; a cancel sets ``stop`` so the walk ends soon."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(fn, stop, *args)
    except asyncio.CancelledError:
        stop.set()
        raise


def _check_dir(path: str) -> None:
    if not os.path.exists(path):
        raise ToolError(f"directory not found: {path}")
    if not os.path.isdir(path):
        raise ToolError(f"{path} is not a directory")


class _Walk:
    """(absolute path, ``/``-relative path, is_dir) under ``base``, skipping SKIP_DIRS and
    not following symlinked directories; ``max_depth`` counts path segments.
    ``incomplete`` tells whether it gave up after MAX_WALK_ENTRIES."""

    def __init__(self, base: str, stop: threading.Event, max_depth: int | None = None) -> None:
        self.base, self.stop, self.max_depth = base, stop, max_depth
        self.incomplete = False

    def __iter__(self) -> Iterator[tuple[str, str, bool]]:
        visited = 0
        for dirpath, dirnames, filenames in os.walk(self.base):
            rel_dir = os.path.relpath(dirpath, self.base)
            prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            depth = prefix.count("/")
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            entries = [(d, True) for d in dirnames] + [(f, False) for f in sorted(filenames)]
            for name, is_dir in entries:
                visited += 1
                if self.stop.is_set():
                    return
                if visited > MAX_WALK_ENTRIES:
                    self.incomplete = True
                    return
                yield os.path.join(dirpath, name), prefix + name, is_dir
            if self.max_depth is not None and depth + 2 > self.max_depth:
                dirnames[:] = []


# ---------------------------------------------------------------------- list_directory


def _list(stop: threading.Event, path: str) -> list[str]:
    _check_dir(path)
    names: list[str] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                names.append(entry.name + ("/" if is_dir else ""))
    except OSError as exc:
        raise ToolError(f"cannot list {path}: {exc.strerror or exc}") from None
    return sorted(names)


class ListDirectoryArgs(Arguments):
    path: Annotated[
        str, Meta(description="Directory, absolute or relative to the workspace.")
    ] = "."


class ListDirectory(BuiltinTool[ListDirectoryArgs]):
    name = "list_directory"
    kind: ToolKind = "read"
    arguments = ListDirectoryArgs
    description = (f"List a directory's entries, sorted (at most {LIST_MAX_ENTRIES}); "
                   "directories end with `/`.")

    def describe(self, args: ListDirectoryArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path or ".")
        return CallInfo(f"List {ctx.display(path)}", "read", (path,),
                        (t.ToolCallLocation(path=path),))

    async def run(self, args: ListDirectoryArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path or ".")
        names = await _in_thread(_list, path)
        shown = fit(names, LIST_MAX_ENTRIES)
        text = "\n".join(shown) if shown else "(empty directory)"
        if marker := list_marker(len(shown), len(names)):
            text += "\n" + marker
        return ToolOutput(text=text, raw_output={"path": path, "entries": len(names),
                                                 "shown": len(shown)})


# ---------------------------------------------------------------------- glob


def _glob(stop: threading.Event, base: str, pattern: str) -> tuple[list[str], int, bool]:
    """Up to GLOB_MAX_PATHS matches (sorted), how many there are, whether the walk ended."""
    _check_dir(base)
    regex = glob_regex(pattern)
    max_depth = None if "**" in pattern else len([s for s in pattern.split("/") if s])
    found: list[str] = []
    total = 0
    walk = _Walk(base, stop, max_depth)
    for abs_path, rel, is_dir in walk:
        if regex.match(rel):
            total += 1
            if len(found) < GLOB_MAX_PATHS:
                found.append(abs_path + ("/" if is_dir else ""))
    return sorted(found), total, not walk.incomplete


class GlobArgs(Arguments):
    pattern: Annotated[str, Meta(min_length=1, description="Glob pattern, relative to path.")]
    path: Annotated[str, Meta(description="Base directory (default: the workspace).")] = ""


def _glob_base(args: GlobArgs, ctx: ToolContext) -> tuple[str, str]:
    return split_glob(ctx.resolve(args.path or "."), args.pattern)


class Glob(BuiltinTool[GlobArgs]):
    name = "glob"
    kind: ToolKind = "search"
    arguments = GlobArgs
    description = (
        "Find files by glob pattern, e.g. `**/*.py` or `src/*.{ts,tsx}` (`**` spans "
        "directories; `*` stays within one). Skips .git, node_modules and .venv. Returns "
        f"sorted paths (at most {GLOB_MAX_PATHS}); directories end with `/`."
    )

    def describe(self, args: GlobArgs, ctx: ToolContext) -> CallInfo:
        title = f"Find `{short(args.pattern)}`"
        if args.path:
            title += f" in {ctx.display(ctx.resolve(args.path))}"
        return CallInfo(title, "read", (_glob_base(args, ctx)[0],))

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolOutput:
        base, pattern = _glob_base(args, ctx)
        found, total, complete = await _in_thread(_glob, base, pattern)
        paths = [ctx.display(p.rstrip("/")) + ("/" if p.endswith("/") else "") for p in found]
        shown = fit(paths, GLOB_MAX_PATHS)
        text = "\n".join(shown) if shown else f"No files match `{args.pattern}`."
        markers = [glob_marker(len(shown), total),
                   None if complete else walk_marker(MAX_WALK_ENTRIES)]
        text = "\n".join([text, *filter(None, markers)])
        return ToolOutput(text=text, raw_output={"matches": total, "shown": len(shown),
                                                 "truncated": len(shown) < total or not complete})


# ---------------------------------------------------------------------- grep

Match = tuple[str, int, str]


@dataclass(slots=True)
class _Hits:
    """The matches kept (GREP_MAX_MATCHES) and those counted (up to GREP_COUNT_LIMIT)."""

    kept: list[Match] = field(default_factory=list)
    total: int = 0
    files: int = 0
    searched: int = 0

    @property
    def full(self) -> bool:
        return self.total >= GREP_COUNT_LIMIT


def _grep_file(path: str, shown: str, regex: re.Pattern[str], hits: _Hits,
               stop: threading.Event, roots: list[str]) -> None:  # fmt: skip
    """Search one file (its matches named ``shown``); a symlink is followed only to a file
    inside the roots, and the file opened is the one checked (``open_checked``), never a
    link swapped in. Text is decoded as read_file decodes it."""
    real = os.path.realpath(path)
    if not any(within(real, root) for root in roots):
        return
    try:
        fd = open_checked(real, os.O_RDONLY)
    except (OSError, ToolError):
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_GREP_FILE_BYTES:
            return
        if is_binary(os.pread(fd, SNIFF_BYTES, 0)):
            return
        with os.fdopen(fd, "rb", closefd=False) as fh:
            decoded = decode(fh.read())
    except OSError:
        return
    finally:
        os.close(fd)
    if decoded.binary:
        return
    hits.searched += 1
    before = hits.total
    for n, line in enumerate(decoded.shown().split("\n"), 1):
        if regex.search(line):
            hits.total += 1
            if len(hits.kept) < GREP_MAX_MATCHES:
                hits.kept.append((shown, n, line.rstrip("\r")))
            if hits.full or stop.is_set():
                break
    hits.files += hits.total > before


def _grep(stop: threading.Event, base: str, real: str, regex: re.Pattern[str],
          glob: str | None, allowed: list[str]) -> tuple[_Hits, bool]:  # fmt: skip
    """Search ``real`` (the checked form of ``base``); matches name paths under ``base``.
    Links lead only into ``allowed`` (the roots and the checked base). Also returns
    whether every file was searched."""
    hits = _Hits()
    if os.path.isfile(real):
        _grep_file(real, base, regex, hits, stop, allowed)
        return hits, True
    _check_dir(real)
    file_re = glob_regex(glob) if glob else None
    by_name = glob is not None and "/" not in glob
    walk = _Walk(real, stop)
    for abs_path, rel, is_dir in walk:
        if is_dir:
            continue
        if file_re is not None and not file_re.match(rel.rsplit("/", 1)[-1] if by_name else rel):
            continue
        _grep_file(abs_path, os.path.join(base, *rel.split("/")), regex, hits, stop, allowed)
        if hits.full:
            return hits, False
    return hits, not walk.incomplete


class GrepArgs(Arguments):
    pattern: Annotated[str, Meta(min_length=1, description="Python regular expression.")]
    path: Annotated[str, Meta(description="File or directory to search.")] = ""
    glob: Annotated[str, Meta(description="Only search files matching this glob.")] = ""


class Grep(BuiltinTool[GrepArgs]):
    name = "grep"
    kind: ToolKind = "search"
    arguments = GrepArgs
    description = (
        "Search file contents with a Python regular expression. Output lines are "
        f"`path:line: text` (at most {GREP_MAX_MATCHES}, cut at {GREP_LINE_CHARS} characters) "
        "and the total. `path` may be a file or a directory (default: the workspace); "
        "`glob` filters files, e.g. `*.py` (matched against the file name) or `src/**/*.ts` "
        "(against the path under `path`). Skips binary files, .git, node_modules and .venv."
    )

    def describe(self, args: GrepArgs, ctx: ToolContext) -> CallInfo:
        title = f"Search `{short(args.pattern)}`"
        base = ctx.resolve(args.path or ".")
        if args.path:
            title += f" in {ctx.display(base)}"
        if args.glob:
            title += f" ({args.glob})"
        return CallInfo(title, "read", (base,))

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression: {exc}") from None
        base = ctx.resolve(args.path or ".")
        real = ctx.real(base)
        if not os.path.exists(real):
            raise ToolError(f"path not found: {base}")
        allowed = [os.path.realpath(root) for root in ctx.roots] + [real]
        hits, complete = await _in_thread(_grep, base, real, regex, args.glob or None, allowed)
        lines = [f"{ctx.display(path)}:{n}: {cut_line(text, GREP_LINE_CHARS)[0]}"
                 for path, n, text in hits.kept]
        shown = fit(lines, GREP_MAX_MATCHES)
        out = "\n".join(shown) if shown else f"No matches in {plural(hits.searched, 'file')}."
        # incomplete: GREP_COUNT_LIMIT matches counted, or the walk stopped (say so)
        markers = [grep_marker(len(shown), hits.total, hits.files, complete),
                   None if complete or hits.full else walk_marker(MAX_WALK_ENTRIES)]
        out = "\n".join([out, *filter(None, markers)])
        kept = hits.kept[: len(shown)]
        return ToolOutput(
            text=out,
            raw_output={"matches": hits.total, "files": hits.files, "searched": hits.searched,
                        "shown": len(shown), "truncated": len(shown) < hits.total or not complete},
            locations=[t.ToolCallLocation(path=p, line=n) for p, n, _ in
                       kept[:GREP_MAX_LOCATIONS]],
        )
