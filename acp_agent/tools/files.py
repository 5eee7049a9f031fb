"""read_file, write_file and edit_file: through the editor's ``fs/*`` methods when it
offers them (its unsaved buffers win), else on the local disk. Output is bounded by
:mod:`.budget`; local bytes are decoded by :mod:`.textcodec` and written back the same way."""

from __future__ import annotations

import asyncio
import base64
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, BinaryIO

from msgspec import UNSET, Meta, UnsetType

from ..conversation import ImagePart
from ..errors import RemoteError, ToolError
from ..protocol import types as t
from . import images, matching
from ._common import PathArg, read_text, write_text
from ._safe import open_checked
from .base import Arguments, BuiltinTool, CallInfo, Preview, ToolContext, ToolKind, ToolOutput
from .budget import (
    EDIT_SNIPPET_LINES,
    IMAGE_MAX_BYTES,
    LINE_MAX_CHARS,
    READ_MAX_BYTES,
    READ_MAX_LINES,
    Window,
    cut_line,
    numbered,
    plural,
    read_markers,
    read_window,
    size,
)
from .textcodec import SNIFF_BYTES, Decoded, decode, is_binary, visible

#: Files up to this size are read whole (and their lines counted); larger ones streamed.
WHOLE_READ_MAX = 8 * 1024 * 1024


@dataclass(slots=True)
class _Text:
    window: Window
    total: int | None
    note: str | None = None


@dataclass(slots=True)
class _Image:
    mime: str
    data: bytes
    size: int


def _read_local(path: str, real: str, offset: int, limit: int | None,
                images_only: bool) -> _Text | _Image | None:  # fmt: skip
    """The lines (or the image) of a local file. ``images_only``: ``None`` unless it is
    an image (the editor serves text)."""
    try:
        fd = open_checked(real, os.O_RDONLY)
    except FileNotFoundError:
        if images_only:
            return None
        raise ToolError(f"file not found: {path}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path} is a directory; use list_directory")
        head = os.pread(fd, SNIFF_BYTES, 0)
        mime = images.sniff(head)
        if mime is not None:
            return _Image(mime, os.pread(fd, min(info.st_size, IMAGE_MAX_BYTES), 0),
                          info.st_size)
        if images_only:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            if info.st_size > WHOLE_READ_MAX:
                if is_binary(head):
                    raise ToolError(_binary(path, info.st_size))
                return _stream(fh, offset, limit)
            decoded = decode(fh.read())
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if decoded.binary:
        raise ToolError(_binary(path, decoded.size))
    lines = _split_lines(decoded.shown())
    return _Text(read_window(lines[offset - 1 :], offset, limit), len(lines), decoded.note())


def _binary(path: str, n: int) -> str:
    return (f"{path} is a binary file ({size(n)}); read_file shows text and images only. "
            "Inspect it with run_command if you must (e.g. `file`, `xxd | head`).")


def _stream(fh: BinaryIO, offset: int, limit: int | None) -> _Text:
    """A window of a file too large to read whole, decoded line by line."""
    invalid: list[int] = []  # lines that are not UTF-8

    def lines() -> Iterator[str]:
        for n, raw in enumerate(fh, 1):
            if n < offset:
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                invalid.append(n)
                yield raw.decode("utf-8", "replace")

    window = read_window(lines(), offset, limit)
    shown_invalid = invalid and invalid[0] <= window.last
    note = "[Not valid UTF-8 in the lines shown; undecodable bytes are shown as �.]"
    return _Text(window, None, note if shown_invalid else None)


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _render(text: _Text) -> str:
    window, total = text.window, text.total
    if not window.entries:
        if window.first == 1:
            return "(empty file)"
        known = f": the file has {plural(total, 'line')}" if total is not None else ""
        return f"(offset {window.first} is past the end{known})"
    return "\n".join([*filter(None, [text.note]), window.text, *read_markers(window, total)])


def _image_output(path: str, shown: str, image: _Image, ctx: ToolContext) -> ToolOutput:
    dims = images.dimensions(image.data, image.mime)
    what = f"{images.label(image.mime)} image" + (f", {dims[0]}×{dims[1]}" if dims else "")
    what += f", {size(image.size)}"
    raw = {"path": path, "mimeType": image.mime, "bytes": image.size}
    if image.size > IMAGE_MAX_BYTES:
        text = (f"{shown} is a {what}: too large to show (at most {size(IMAGE_MAX_BYTES)}). "
                "Make a smaller copy with run_command (e.g. ImageMagick, Pillow) and read it.")
    elif not ctx.images:
        text = f"{shown} is a {what}. The current model cannot see images, so it is not shown."
    else:
        encoded = base64.b64encode(image.data).decode("ascii")
        return ToolOutput(text=f"{shown}: {what} (attached).", raw_output=raw,
                          images=[ImagePart(encoded, image.mime)],
                          locations=[t.ToolCallLocation(path=path)])
    return ToolOutput(text=text, raw_output=raw, locations=[t.ToolCallLocation(path=path)])


class ReadFileArgs(Arguments):
    path: PathArg
    offset: Annotated[int, Meta(ge=1, description="1-based first line.")] = 1
    limit: Annotated[
        int, Meta(ge=1, description=f"Maximum number of lines (default {READ_MAX_LINES:,}).")
    ] | UnsetType = UNSET


class ReadFile(BuiltinTool[ReadFileArgs]):
    name = "read_file"
    kind: ToolKind = "read"
    arguments = ReadFileArgs
    description = (
        "Read a file as numbered lines (`   N<TAB>text`): at most "
        f"{READ_MAX_LINES:,} lines and {READ_MAX_BYTES // 1000} KB per call, lines cut at "
        f"{LINE_MAX_CHARS:,} characters; page with offset and limit. Images (PNG, JPEG, "
        "GIF, WebP) are returned as images."
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
        editor = ctx.client.allows("fs/read_text_file")
        local: _Text | _Image | None = None
        if not editor or path.lower().endswith(images.IMAGE_SUFFIXES):
            local = await asyncio.to_thread(
                _read_local, path, ctx.real(path), offset, limit, editor)
        if isinstance(local, _Image):
            return _image_output(path, ctx.display(path), local, ctx)
        text = local or await self._from_editor(ctx, path, offset, limit)
        window = text.window
        return ToolOutput(
            text=_render(text),
            raw_output={"path": path, "firstLine": offset, "lastLine": window.last,
                        "totalLines": text.total, "more": window.more,
                        "truncated": window.more or window.long_lines > 0},
            locations=[t.ToolCallLocation(path=path, line=offset)],
        )

    @staticmethod
    async def _from_editor(ctx: ToolContext, path: str, offset: int, limit: int | None) -> _Text:
        want = limit or READ_MAX_LINES
        try:
            response = await ctx.client.call(
                "fs/read_text_file",
                t.ReadTextFileRequest(  # one line more than shown: does the file go on?
                    session_id=ctx.session_id, path=path,
                    line=offset if offset > 1 else UNSET, limit=want + 1),
                t.ReadTextFileResponse,
            )
        except RemoteError as exc:
            raise ToolError(f"the editor could not read {path}: {exc.message}") from None
        lines = _split_lines(str(response.content))
        total = offset - 1 + len(lines) if lines and len(lines) <= want else None
        return _Text(read_window(lines, offset, limit), total)


class WriteFileArgs(Arguments):
    path: PathArg
    content: Annotated[str, Meta(description="The complete new content.")]


class WriteFile(BuiltinTool[WriteFileArgs]):
    name = "write_file"
    kind: ToolKind = "edit"
    arguments = WriteFileArgs
    streamed = ("content",)
    description = (
        "Create or overwrite a file with the given text, written as UTF-8 (parent "
        "directories are created). Prefer edit_file for changes to existing files."
    )

    def describe(self, args: WriteFileArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path)
        return CallInfo(f"Write {ctx.display(path)}", "write", (path,),
                        (t.ToolCallLocation(path=path),))

    async def prepare(self, args: WriteFileArgs, ctx: ToolContext) -> Preview:
        path = ctx.resolve(args.path)
        old = await read_text(ctx, path, missing_ok=True)
        diff = t.Diff(path=path, old_text=_old_text(old), new_text=args.content)
        return Preview([diff], _Read(old))

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        content = args.content
        read = ctx.prepared
        old = read.old if isinstance(read, _Read) else await read_text(ctx, path, missing_ok=True)
        await write_text(ctx, path, content)
        lines = len(_split_lines(content))
        shown = ctx.display(path)
        text = f"{'Created' if old is None else 'Wrote'} {shown} ({plural(lines, 'line')})."
        if old is not None and old.binary:
            text += f" It replaced a binary file of {size(old.size)}."
        elif old is not None and not old.plain:
            text += f" The old content was {old.describe()}; the new content is UTF-8."
        return ToolOutput(
            text=text,
            content=[t.Diff(path=path, old_text=_old_text(old), new_text=content)],
            raw_output={"path": path, "created": old is None, "lines": lines},
            locations=[t.ToolCallLocation(path=path, line=1)],
        )


@dataclass(frozen=True, slots=True)
class _Read:
    """A file's content as ``prepare`` read it (``None``: it did not exist)."""

    old: Decoded | None


def _old_text(old: Decoded | None) -> str | None:
    if old is None:
        return None
    return f"(binary file, {size(old.size)})" if old.binary else old.shown()


class EditFileArgs(Arguments):
    path: PathArg
    old_string: Annotated[str, Meta(min_length=1, description="The text to replace.")]
    new_string: Annotated[str, Meta(description="The replacement text.")]
    replace_all: Annotated[
        bool, Meta(description="Replace every occurrence (default false).")
    ] = False


class EditFile(BuiltinTool[EditFileArgs]):
    name = "edit_file"
    kind: ToolKind = "edit"
    arguments = EditFileArgs
    streamed = ("old_string", "new_string")
    description = (
        "Replace text in a file. old_string should match exactly and be unique (include "
        "surrounding lines) unless replace_all is true. If it matches only with different "
        "indentation or trailing whitespace, in one place, that place is edited and "
        "new_string re-indented. The file's encoding and line endings are kept."
    )

    def describe(self, args: EditFileArgs, ctx: ToolContext) -> CallInfo:
        path = ctx.resolve(args.path)
        return CallInfo(f"Edit {ctx.display(path)}", "write", (path,),
                        (t.ToolCallLocation(path=path),))

    async def prepare(self, args: EditFileArgs, ctx: ToolContext) -> Preview:
        """The edit, worked out (and refused, if it cannot be made) before approval."""
        path = ctx.resolve(args.path)
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are identical; nothing to change")
        file = await read_text(ctx, path)
        assert file is not None
        shown = ctx.display(path)
        if file.binary:
            raise ToolError(f"{shown} is a binary file ({size(file.size)}); edit_file edits "
                            "text only.")
        edit = matching.apply(file.text, args.old_string, args.new_string,
                              replace_all=args.replace_all, name=shown)
        diff = t.Diff(path=path, old_text=file.shown(), new_text=visible(edit.content))
        return Preview([diff], (file, edit))

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        prepared = ctx.prepared
        if not isinstance(prepared, tuple):
            prepared = (await self.prepare(args, ctx)).state
        file, edit = prepared
        shown = ctx.display(path)
        await write_text(ctx, path, edit.content, file)
        n, line = edit.count, edit.line
        text = f"Edited {shown}: replaced {plural(n, 'occurrence')} (first at line {line})."
        if edit.note:
            text += " " + edit.note
        if not file.plain:
            text += f" The file's encoding was kept: {file.describe()}."
        new_text = visible(edit.content)
        text += "\n" + _snippet(new_text, line, edit.new_lines)
        return ToolOutput(
            text=text,
            content=[t.Diff(path=path, old_text=file.shown(), new_text=new_text)],
            raw_output={"path": path, "replacements": n, "line": line,
                        "fuzzy": edit.fuzzy or None},
            locations=[t.ToolCallLocation(path=path, line=line)],
        )


def _snippet(text: str, line: int, changed: int) -> str:
    lines = _split_lines(text)
    first = max(1, line - 2)
    last = min(len(lines), line + changed + 1, first + EDIT_SNIPPET_LINES - 1)
    return "\n".join(numbered(n, cut_line(lines[n - 1], LINE_MAX_CHARS)[0])
                     for n in range(first, last + 1))
