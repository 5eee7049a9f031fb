"""list_directory, glob and grep. list_directory is a local listing (ACP has no method for
it); glob and grep see the files ripgrep sees (:mod:`._rg`: ignore files honoured,
version-control directories skipped, symbolic links never followed), run as a
subprocess and bounded in output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal, TypeVar

from msgspec import Meta

from ..errors import ToolError
from ..protocol import types as t
from . import _rg
from ._common import glob_regex, short, split_glob
from .base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput
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
    list_marker,
    walk_marker,
)
from .textcodec import decode

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


def _text(raw: bytes) -> str:
    """A path or a line as rg wrote it: UTF-8, else decoded as read_file decodes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return decode(raw).shown()


def _rel(raw: bytes) -> str:
    return _text(raw).removeprefix("./")


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


async def _glob(base: str, pattern: str, env: Any) -> tuple[list[str], int, bool]:
    """The matches (``/``-relative to ``base``, directories ending in ``/``), newest
    first, at most GLOB_MAX_PATHS; how many there are; whether every file was listed.
    Directories are those holding a file rg lists."""
    _check_dir(base)
    regex = glob_regex(pattern)
    depth = None if "**" in pattern else len([s for s in pattern.split("/") if s])
    args = [*_rg.base_args(), "--files"]
    if depth is not None:  # one level more: the directories holding files
        args += ["--max-depth", str(depth + 1)]
    found: set[str] = set()
    dirs: set[str] = set()
    listed = 0
    complete = True
    async with contextlib.aclosing(_rg.lines([*args, "--", "."], base, env)) as listing:
        async for line in listing:
            listed += 1
            if listed > MAX_WALK_ENTRIES:
                complete = False
                break
            rel = _rel(line)
            if regex.match(rel):
                found.add(rel)
            parent = rel.rpartition("/")[0]
            while parent and parent not in dirs:
                dirs.add(parent)
                if regex.match(parent):
                    found.add(parent + "/")
                parent = parent.rpartition("/")[0]
    ordered = await asyncio.to_thread(_newest_first, base, found)
    return ordered[:GLOB_MAX_PATHS], len(found), complete


def _newest_first(base: str, rels: set[str]) -> list[str]:
    def key(rel: str) -> tuple[float, str]:
        try:
            return -os.lstat(os.path.join(base, rel)).st_mtime, rel
        except OSError:
            return 0.0, rel

    return sorted(rels, key=key)


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
        "directories; `*` stays within one). Lists the files (and directories holding "
        "files) that grep would search: what .gitignore, .ignore and the git excludes "
        "ignore is skipped, as are version-control directories; symbolic links are not "
        f"followed. Newest first (last modified), at most {GLOB_MAX_PATHS}; directories end "
        "with `/`."
    )

    def describe(self, args: GlobArgs, ctx: ToolContext) -> CallInfo:
        title = f"Find `{short(args.pattern)}`"
        if args.path:
            title += f" in {ctx.display(ctx.resolve(args.path))}"
        return CallInfo(title, "read", (_glob_base(args, ctx)[0],))

    async def run(self, args: GlobArgs, ctx: ToolContext) -> ToolOutput:
        base, pattern = _glob_base(args, ctx)
        real = ctx.real(base)
        found, total, complete = await _glob(real, pattern, ctx.env)
        paths = [ctx.display(os.path.join(base, *p.rstrip("/").split("/")))
                 + ("/" if p.endswith("/") else "") for p in found]  # fmt: skip
        shown = fit(paths, GLOB_MAX_PATHS)
        text = "\n".join(shown) if shown else f"No files match `{args.pattern}`."
        markers = [glob_marker(len(shown), total),
                   None if complete else walk_marker(MAX_WALK_ENTRIES)]
        text = "\n".join([text, *filter(None, markers)])
        return ToolOutput(text=text, raw_output={"matches": total, "shown": len(shown),
                                                 "truncated": len(shown) < total or not complete})


# ---------------------------------------------------------------------- grep

OutputMode = Literal["content", "files_with_matches", "count"]
_CONTEXT = Meta(ge=0, le=50)
_MARKER = b" [... omitted end of long line]"


class GrepArgs(Arguments):
    pattern: Annotated[str, Meta(min_length=1, description="Regular expression (Rust syntax).")]
    path: Annotated[str, Meta(description="File or directory to search.")] = ""
    glob: Annotated[str, Meta(description=(
        "Only files matching this glob: `*.py` (by name) or `src/**/*.ts` (by path under "
        "`path`); `!*.min.js` excludes."))] = ""  # fmt: skip
    type: Annotated[str, Meta(description="Only files of this ripgrep type: py, js, ts, "
                                          "rust, go, java, c, cpp, md...")] = ""
    output_mode: Annotated[OutputMode, Meta(description=(
        "content (default): matching lines; files_with_matches: paths only; count: "
        "matching lines per file."))] = "content"  # fmt: skip
    context: Annotated[int, _CONTEXT, Meta(description="Lines of context around each match.")] = 0
    before: Annotated[int, _CONTEXT, Meta(description="Lines of context before each match.")] = 0
    after: Annotated[int, _CONTEXT, Meta(description="Lines of context after each match.")] = 0
    case_insensitive: Annotated[bool, Meta(description="Ignore case.")] = False
    multiline: Annotated[bool, Meta(description=(
        "Let the pattern span lines (`.` matches newlines too).")) ] = False  # fmt: skip
    head_limit: Annotated[int, Meta(ge=1, le=2000, description=(
        f"At most this many output lines (default {GREP_MAX_MATCHES})."))] = GREP_MAX_MATCHES
    offset: Annotated[int, Meta(ge=0, description="Skip this many output lines first "
                                                   "(the next page).")] = 0


def _grep_args(args: GrepArgs, target: str) -> list[str]:
    flags = [*_rg.base_args(), "--sort", "path", "--with-filename"]
    if args.output_mode == "files_with_matches":
        flags.append("--files-with-matches")
    elif args.output_mode == "count":
        flags += ["--count", "--null"]
    else:
        flags += ["--line-number", "--null", "--max-columns", "4096", "--max-columns-preview"]
        if args.context:
            flags += ["--context", str(args.context)]
        if args.before:
            flags += ["--before-context", str(args.before)]
        if args.after:
            flags += ["--after-context", str(args.after)]
    if args.case_insensitive:
        flags.append("--ignore-case")
    if args.multiline:
        flags += ["--multiline", "--multiline-dotall"]
    if args.glob:
        flags += ["--glob", args.glob]
    if args.type:
        flags += ["--type", args.type]
    return [*flags, "--regexp", args.pattern, "--", target]


class _Found:
    """What a grep found: its output lines (only the page asked for is kept), how many
    there are, the matching lines and files, the locations of the first matches."""

    def __init__(self, offset: int, limit: int) -> None:
        self.offset, self.limit = offset, limit
        self.page: list[str] = []
        self.entries = 0
        self.matches = 0
        self.files: set[str] = set()
        self.locations: list[tuple[str, int]] = []
        self.complete = True

    def add(self, line: str, location: tuple[str, int] | None = None) -> None:
        if self.offset <= self.entries < self.offset + self.limit:
            self.page.append(line)
            if location is not None and len(self.locations) < GREP_MAX_LOCATIONS:
                self.locations.append(location)
        self.entries += 1


async def _grep(args: GrepArgs, base: str, real: str, env: Any,
                display: Callable[[str], str]) -> _Found:  # fmt: skip
    """Run rg on ``real`` (the checked form of ``base``); paths named under ``base``:
    (as shown, absolute)."""
    if os.path.isdir(real):
        cwd, target = real, "."
    else:
        cwd, target = os.path.dirname(real), real

    def shown(raw: bytes) -> tuple[str, str]:
        path = base if target != "." else os.path.join(base, *_rel(raw).split("/"))
        return display(path), path

    found = _Found(args.offset, args.head_limit)
    async with contextlib.aclosing(_rg.lines(_grep_args(args, target), cwd, env)) as out:
        await _collect(out, found, args.output_mode, shown)
    return found


async def _collect(out: AsyncIterator[bytes], found: _Found, mode: OutputMode,
                   shown: Callable[[bytes], tuple[str, str]]) -> None:  # fmt: skip
    """rg's output lines into ``found`` (in the mode's format)."""
    async for line in out:
        if mode == "files_with_matches":
            path, _ = shown(line)
            found.files.add(path)
            found.add(path)
            continue
        raw_path, nul, rest = line.partition(b"\0")
        if not nul:
            if line == b"--" and mode == "content":
                found.add("--")
            continue  # e.g. "binary file matches" for a file named explicitly
        path, absolute = shown(raw_path)
        if mode == "count":
            found.files.add(path)
            found.matches += int(rest or b"0")
            found.add(f"{path}:{int(rest or b'0')}")
            continue
        number, sep, text = _split_numbered(rest)
        if sep == ":":
            found.matches += 1
            found.files.add(path)
        line_text = _text(text.removesuffix(_MARKER)).rstrip("\r")
        if text.endswith(_MARKER):  # rg cut it already: how much is left is unknown
            shown_text = line_text[:GREP_LINE_CHARS] + "… [long line cut]"
        else:
            shown_text = cut_line(line_text, GREP_LINE_CHARS)[0]
        found.add(f"{path}{sep}{number}{sep} {shown_text}",
                  (absolute, number) if sep == ":" else None)
        if found.matches >= GREP_COUNT_LIMIT:
            found.complete = False
            break


def _split_numbered(rest: bytes) -> tuple[int, str, bytes]:
    """``12:text`` (a match) or ``12-text`` (context) -> (12, ":" or "-", text)."""
    i = 0
    while i < len(rest) and rest[i : i + 1].isdigit():
        i += 1
    sep = rest[i : i + 1].decode() or ":"
    return int(rest[:i] or b"0"), sep, rest[i + 1 :]


def _grep_marker(args: GrepArgs, found: _Found, shown: int) -> str | None:
    first, total = args.offset, found.entries
    if first + shown >= total and found.complete:
        return None
    plus = "" if found.complete else "+"
    what = {"content": "lines", "files_with_matches": "files", "count": "files"}[args.output_mode]
    span = f"{what} {first + 1:,}-{first + shown:,}" if shown else f"no {what}"
    summary = (f"{found.matches:,}{plus} matching lines in {len(found.files):,}{plus} files"
               if args.output_mode != "files_with_matches" else f"{len(found.files):,}{plus} files")
    nxt = (f" Next page: offset={first + shown}." if first + shown < total else "")
    return (f"[Showing {span} of {total:,}{plus} ({summary}).{nxt} Or narrow with `glob`, "
            "`type`, `path` or a more specific pattern.]")


class Grep(BuiltinTool[GrepArgs]):
    name = "grep"
    kind: ToolKind = "search"
    arguments = GrepArgs
    description = (
        "Search file contents with ripgrep (Rust regular expressions: no look-around or "
        "backreferences). `path` is a file or directory (default: the workspace). Skips what "
        ".gitignore (in git repositories), .ignore and the git excludes ignore, "
        "version-control directories, binary files and files over 10 MB; hidden files are "
        "searched, symbolic links are not followed, and a directory named in `path` is "
        "searched even if ignored. Output modes: `content` (default; `path:line: text`, "
        "context lines `path-line- text`, groups apart by `--`), `files_with_matches` "
        "(paths), `count` (`path:N` matching lines). In path order; at most `head_limit` "
        f"lines (default {GREP_MAX_MATCHES}), each cut at {GREP_LINE_CHARS} characters; the "
        "last line says how many more there are and the `offset` of the next page."
    )

    def describe(self, args: GrepArgs, ctx: ToolContext) -> CallInfo:
        title = f"Search `{short(args.pattern)}`"
        base = ctx.resolve(args.path or ".")
        if args.path:
            title += f" in {ctx.display(base)}"
        filters = [f for f in (args.glob, args.type and f"type {args.type}") if f]
        if filters:
            title += f" ({', '.join(filters)})"
        return CallInfo(title, "read", (base,))

    async def run(self, args: GrepArgs, ctx: ToolContext) -> ToolOutput:
        base = ctx.resolve(args.path or ".")
        real = ctx.real(base)
        if not os.path.exists(real):
            raise ToolError(f"path not found: {base}")
        found = await _grep(args, base, real, ctx.env, ctx.display)
        shown = fit(found.page, args.head_limit)
        if shown:
            out = "\n".join(shown)
        elif found.entries:
            out = f"(offset {args.offset} is past the last of {found.entries:,} lines)"
        else:
            out = "No matches."
        if marker := _grep_marker(args, found, len(shown)):
            out += "\n" + marker
        return ToolOutput(
            text=out,
            raw_output={"mode": args.output_mode, "matches": found.matches,
                        "files": len(found.files), "lines": found.entries,
                        "offset": args.offset, "shown": len(shown),
                        "truncated": args.offset + len(shown) < found.entries
                        or not found.complete},
            locations=[t.ToolCallLocation(path=p, line=n)
                       for p, n in found.locations[: len(shown)]],
        )

