"""read_file, write_file and edit_file: through the editor's ``fs/*`` methods when it
offers them (its unsaved buffers win), else on the local disk."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterable, Iterator
from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from ..errors import RemoteError, ToolError
from ..protocol import types as t
from ._common import SNIFF_BYTES, PathArg, is_binary, read_text, write_text
from ._safe import open_checked
from .base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput

#: Upper bound of read_file's output (characters, ~bytes for code).
MAX_READ_CHARS = 256 * 1024
#: Lines of context shown around an edit.
EDIT_SNIPPET_LINES = 20


def _numbered(lines: Iterable[str], start: int, limit: int | None) -> tuple[list[str], int, bool]:
    """Number ``lines`` from ``start``; returns (entries, last line shown, cut for size)."""
    out: list[str] = []
    size = 0
    last = start - 1
    for line in lines:
        if limit is not None and last - start + 1 >= limit:
            break
        entry = f"{last + 1:6}\t{line.rstrip(chr(13) + chr(10))}"
        if size + len(entry) + 1 > MAX_READ_CHARS:
            if not out:  # one enormous line: show its start
                out.append(entry[: MAX_READ_CHARS - 40] + " [line truncated]")
                last += 1
            return out, last, True
        out.append(entry)
        size += len(entry) + 1
        last += 1
    return out, last, False


def _read_numbered_local(
    path: str, real: str, offset: int, limit: int | None
) -> tuple[str, int, int, bool]:
    try:
        fd = open_checked(real, os.O_RDONLY)
    except FileNotFoundError:
        raise ToolError(f"file not found: {path}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path} is a directory; use list_directory")
        if is_binary(os.pread(fd, SNIFF_BYTES, 0)):
            text = f"({path} is a binary file of {info.st_size} bytes; not shown)"
            return text, offset, offset - 1, False
        with os.fdopen(fd, encoding="utf-8", errors="replace", newline="", closefd=False) as fh:
            lines = _skip(fh, offset - 1)
            entries, last, cut = _numbered(lines, offset, limit)
            more = cut or next(lines, None) is not None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return _render(entries, offset, last, cut, more), offset, last, cut


def _skip(lines: Iterable[str], n: int) -> Iterator[str]:
    it = iter(lines)
    for _ in range(n):
        if next(it, None) is None:
            break
    return it


def _render(entries: list[str], offset: int, last: int, cut: bool, more: bool) -> str:
    if not entries:
        return "(empty file)" if offset == 1 else f"(no lines at offset {offset}: past the end)"
    text = "\n".join(entries)
    if cut:
        text += (f"\n[Output truncated at {MAX_READ_CHARS // 1024} KiB after line {last}; "
                 f"call read_file with offset={last + 1} to continue.]")
    elif more:
        text += f"\n[The file continues; call read_file with offset={last + 1} to read more.]"
    return text


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class ReadFileArgs(Arguments):
    path: PathArg
    offset: Annotated[int, Meta(ge=1, description="1-based first line.")] = 1
    limit: Annotated[int, Meta(ge=1, description="Maximum number of lines.")] | UnsetType = UNSET


class ReadFile(BuiltinTool[ReadFileArgs]):
    name = "read_file"
    kind: ToolKind = "read"
    arguments = ReadFileArgs
    description = (
        "Read a text file. Returns numbered lines (`   N<TAB>text`). Use offset (1-based "
        "first line) and limit (max lines) for large files; output is capped at 256 KiB."
    )

    def describe(self, args: ReadFileArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path)
        title = f"Read {ctx.display(path)}"
        limit = None if isinstance(args.limit, UnsetType) else args.limit
        if args.offset > 1 or limit:
            first = args.offset
            title += f" (lines {first}-{first + limit - 1})" if limit else f" (from line {first})"
        return CallInfo(title, "read", (path,), (t.ToolCallLocation(path=path, line=args.offset),))

    async def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        offset = args.offset
        limit = None if isinstance(args.limit, UnsetType) else args.limit
        if ctx.client.allows("fs/read_text_file"):
            try:
                response = await ctx.client.call(
                    "fs/read_text_file",
                    t.ReadTextFileRequest(
                        session_id=ctx.session_id, path=path,
                        line=offset if offset > 1 else UNSET,
                        limit=limit if limit is not None else UNSET,
                    ),
                    t.ReadTextFileResponse,
                )
            except RemoteError as exc:
                raise ToolError(f"the editor could not read {path}: {exc.message}") from None
            entries, last, cut = _numbered(_split_lines(str(response.content)), offset, limit)
            text = _render(entries, offset, last, cut, False)
        else:
            text, offset, last, cut = await asyncio.to_thread(
                _read_numbered_local, path, ctx.real(path), offset, limit)
        return ToolOutput(
            text=text,
            raw_output={"path": path, "firstLine": offset, "lastLine": last, "truncated": cut},
            locations=[t.ToolCallLocation(path=path, line=offset)],
        )


class WriteFileArgs(Arguments):
    path: PathArg
    content: Annotated[str, Meta(description="The complete new content.")]


class WriteFile(BuiltinTool[WriteFileArgs]):
    name = "write_file"
    kind: ToolKind = "edit"
    arguments = WriteFileArgs
    description = (
        "Create or overwrite a text file with the given content (parent directories are "
        "created). Prefer edit_file for changes to existing files."
    )

    def describe(self, args: WriteFileArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path)
        return CallInfo(f"Write {ctx.display(path)}", "write", (path,),
                        (t.ToolCallLocation(path=path),))

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        content = args.content
        old = await read_text(ctx, path, missing_ok=True)
        await write_text(ctx, path, content)
        lines = len(_split_lines(content))
        verb = "Created" if old is None else "Wrote"
        return ToolOutput(
            text=f"{verb} {ctx.display(path)} ({lines} lines).",
            content=[t.Diff(path=path, old_text=old, new_text=content)],
            raw_output={"path": path, "created": old is None, "lines": lines},
            locations=[t.ToolCallLocation(path=path, line=1)],
        )


class EditFileArgs(Arguments):
    path: PathArg
    old_string: Annotated[str, Meta(min_length=1, description="The exact text to replace.")]
    new_string: Annotated[str, Meta(description="The replacement text.")]
    replace_all: Annotated[
        bool, Meta(description="Replace every occurrence (default false).")
    ] = False


class EditFile(BuiltinTool[EditFileArgs]):
    name = "edit_file"
    kind: ToolKind = "edit"
    arguments = EditFileArgs
    description = (
        "Replace an exact string in a file. old_string must match the file exactly "
        "(whitespace included) and be unique unless replace_all is true; include enough "
        "surrounding lines to make it unique."
    )

    def describe(self, args: EditFileArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path)
        return CallInfo(f"Edit {ctx.display(path)}", "write", (path,),
                        (t.ToolCallLocation(path=path),))

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        old_string, new_string = args.old_string, args.new_string
        if old_string == new_string:
            raise ToolError("old_string and new_string are identical; nothing to change")
        content = await read_text(ctx, path)
        assert content is not None
        shown = ctx.display(path)
        count = content.count(old_string)
        if count == 0 and "\r\n" in content and "\n" in old_string and "\r\n" not in old_string:
            crlf = old_string.replace("\n", "\r\n")  # the model writes \n; the file uses \r\n
            if content.count(crlf):
                old_string = crlf
                new_string = new_string.replace("\r\n", "\n").replace("\n", "\r\n")
                count = content.count(old_string)
        if count == 0:
            raise ToolError(
                f"old_string was not found in {shown}. It must match exactly, including "
                "whitespace and indentation; read the file again to see its current content."
            )
        if count > 1 and not args.replace_all:
            raise ToolError(
                f"old_string occurs {count} times in {shown}; include more surrounding context "
                "to make it unique, or set replace_all to true."
            )
        index = content.find(old_string)
        line = content.count("\n", 0, index) + 1
        if args.replace_all:
            new_content = content.replace(old_string, new_string)
        else:
            new_content = content[:index] + new_string + content[index + len(old_string):]
        await write_text(ctx, path, new_content)
        n = count if args.replace_all else 1
        snippet = _snippet(new_content, line, new_string.count("\n") + 1)
        return ToolOutput(
            text=(f"Edited {shown}: replaced {n} occurrence{'s' if n > 1 else ''} "
                  f"(first at line {line}).\n{snippet}"),
            content=[t.Diff(path=path, old_text=content, new_text=new_content)],
            raw_output={"path": path, "replacements": n, "line": line},
            locations=[t.ToolCallLocation(path=path, line=line)],
        )


def _snippet(text: str, line: int, changed: int) -> str:
    lines = _split_lines(text)
    first = max(1, line - 2)
    last = min(len(lines), line + changed + 1, first + EDIT_SNIPPET_LINES - 1)
    entries, _, _ = _numbered(lines[first - 1 : last], first, None)
    return "\n".join(entries)
