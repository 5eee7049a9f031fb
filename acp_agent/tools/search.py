"""list_directory, glob and grep: local walks (ACP has no method for them), run in a
worker thread, bounded in output and in the number of entries visited."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar

from msgspec import Meta

from ..errors import ToolError
from ..protocol import types as t
from ._common import SKIP_DIRS, SNIFF_BYTES, glob_regex, is_binary, short, split_glob
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

MAX_LIST_ENTRIES = 1000
MAX_GLOB_RESULTS = 500
MAX_GREP_MATCHES = 200
MAX_GREP_LOCATIONS = 20
MAX_GREP_LINE = 300
MAX_GREP_FILE_BYTES = 10 * 1024 * 1024
#: Entries a walk may visit before it gives up (keeps a search of ``/`` finite).
MAX_WALK_ENTRIES = 200_000

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


def _walk(base: str, stop: threading.Event, max_depth: int | None = None
          ) -> Iterator[tuple[str, str, bool]]:
    """(absolute path, ``/``-relative path, is_dir) under ``base``, skipping SKIP_DIRS and
    not following symlinked directories; ``max_depth`` counts path segments."""
    visited = 0
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = os.path.relpath(dirpath, base)
        prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        depth = prefix.count("/")
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        entries = [(d, True) for d in dirnames] + [(f, False) for f in sorted(filenames)]
        for name, is_dir in entries:
            visited += 1
            if visited > MAX_WALK_ENTRIES or stop.is_set():
                return
            yield os.path.join(dirpath, name), prefix + name, is_dir
        if max_depth is not None and depth + 2 > max_depth:
            dirnames[:] = []


# ---------------------------------------------------------------------- list_directory


def _list(stop: threading.Event, path: str) -> tuple[list[str], int]:
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
    names.sort()
    return names[:MAX_LIST_ENTRIES], len(names)


class ListDirectoryArgs(Arguments):
    path: Annotated[
        str, Meta(description="Directory, absolute or relative to the workspace.")
    ] = "."


class ListDirectory(BuiltinTool[ListDirectoryArgs]):
    name = "list_directory"
    kind: ToolKind = "read"
    arguments = ListDirectoryArgs
    description = "List a directory's entries, sorted; directories end with `/`."

    def describe(self, args: ListDirectoryArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path or ".")
        return CallInfo(f"List {ctx.display(path)}", "read", (path,),
                        (t.ToolCallLocation(path=path),))

    async def run(self, args: ListDirectoryArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path or ".")
        names, total = await _in_thread(_list, path)
        text = "\n".join(names) if names else "(empty directory)"
        if total > len(names):
            text += f"\n[... {total - len(names)} more entries not shown]"
        return ToolOutput(text=text, raw_output={"path": path, "entries": total})


# ---------------------------------------------------------------------- glob


def _glob(stop: threading.Event, base: str, pattern: str) -> tuple[list[str], bool]:
    _check_dir(base)
    regex = glob_regex(pattern)
    max_depth = None if "**" in pattern else len([s for s in pattern.split("/") if s])
    found: list[str] = []
    for abs_path, rel, is_dir in _walk(base, stop, max_depth):
        if regex.match(rel):
            if len(found) >= MAX_GLOB_RESULTS:
                return sorted(found), True
            found.append(abs_path + ("/" if is_dir else ""))
    return sorted(found), False


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
        f"sorted paths (at most {MAX_GLOB_RESULTS}); directories end with `/`."
    )

    def describe(self, args: GlobArgs, ctx: ToolContext) -> CallInfo:
        title = f"Find `{short(args.pattern)}`"
        if args.path:
            title += f" in {ctx.display(ctx.resolve(args.path))}"
        return CallInfo(title, "read", (_glob_base(args, ctx)[0],))

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolOutput:
        base, pattern = _glob_base(args, ctx)
        found, more = await _in_thread(_glob, base, pattern)
        shown = [ctx.display(p.rstrip("/")) + ("/" if p.endswith("/") else "") for p in found]
        text = "\n".join(shown) if shown else f"No files match `{args.pattern}`."
        if more:
            text += f"\n[Stopped after {MAX_GLOB_RESULTS} matches; narrow the pattern.]"
        return ToolOutput(text=text, raw_output={"matches": len(found), "truncated": more})


# ---------------------------------------------------------------------- grep

Match = tuple[str, int, str]


def _grep_file(path: str, regex: re.Pattern[str], out: list[Match], stop: threading.Event,
               roots: list[str]) -> None:  # fmt: skip
    """Search one file; a symlink is followed only to a file inside the roots, and the
    file opened is the one checked (``open_checked``), never a link swapped in."""
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
        with os.fdopen(fd, encoding="utf-8", errors="replace", newline="", closefd=False) as fh:
            for n, line in enumerate(fh, 1):
                if regex.search(line):
                    out.append((path, n, line.rstrip("\r\n")))
                    if len(out) > MAX_GREP_MATCHES or stop.is_set():
                        return
    except OSError:
        return
    finally:
        os.close(fd)


def _grep(stop: threading.Event, base: str, real: str, regex: re.Pattern[str],
          glob: str | None, allowed: list[str]) -> tuple[list[Match], int]:  # fmt: skip
    """Search ``real`` (the checked form of ``base``); matches name paths under ``base``.
    Links lead only into ``allowed`` (the roots and the checked base)."""
    matches: list[Match] = []
    if os.path.isfile(real):
        _grep_file(real, regex, matches, stop, allowed)
        return [(base, n, text) for _, n, text in matches], 1
    _check_dir(real)
    file_re = glob_regex(glob) if glob else None
    by_name = glob is not None and "/" not in glob
    files = 0
    for abs_path, rel, is_dir in _walk(real, stop):
        if is_dir:
            continue
        if file_re is not None and not file_re.match(rel.rsplit("/", 1)[-1] if by_name else rel):
            continue
        files += 1
        found: list[Match] = []
        _grep_file(abs_path, regex, found, stop, allowed)
        shown = os.path.join(base, *rel.split("/"))
        matches += [(shown, n, text) for _, n, text in found]
        if len(matches) > MAX_GREP_MATCHES:
            break
    return matches, files


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
        f"`path:line: text` (at most {MAX_GREP_MATCHES}). `path` may be a file or a "
        "directory (default: the workspace); `glob` filters files, e.g. `*.py` (matched "
        "against the file name) or `src/**/*.ts` (against the path under `path`). Skips "
        "binary files, .git, node_modules and .venv."
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
        matches, files = await _in_thread(_grep, base, real, regex, args.glob or None, allowed)
        more = len(matches) > MAX_GREP_MATCHES
        matches = matches[:MAX_GREP_MATCHES]
        lines = []
        for path, n, text in matches:
            if len(text) > MAX_GREP_LINE:
                text = text[:MAX_GREP_LINE] + "…"
            lines.append(f"{ctx.display(path)}:{n}: {text}")
        out = "\n".join(lines) if lines else f"No matches in {files} file(s)."
        if more:
            out += f"\n[Stopped after {MAX_GREP_MATCHES} matches; narrow the search.]"
        return ToolOutput(
            text=out,
            raw_output={"matches": len(matches), "files": files, "truncated": more},
            locations=[t.ToolCallLocation(path=p, line=n)
                       for p, n, _ in matches[:MAX_GREP_LOCATIONS]],
        )
