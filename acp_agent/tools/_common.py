"""Helpers shared by the built-in tools: argument types, the editor-or-disk file routes,
and glob patterns."""

from __future__ import annotations

import asyncio
import functools
import os
import re
from typing import Annotated, TypeAlias

from msgspec import Meta

from ..errors import RemoteError, ToolError
from ..protocol import types as t
from ._safe import read_checked, write_checked
from .base import ToolContext
from .textcodec import ESCAPED, Decoded, decode

# ------------------------------------------------------------------------ arguments

#: A path argument: absolute, or relative to the session's directory.
PathArg: TypeAlias = Annotated[
    str, Meta(min_length=1, description="File path, absolute or relative to the workspace.")
]


# ------------------------------------------------------------------------ output


def text_content(text: str) -> t.Content:
    return t.Content(content=t.TextContent(text=text))


def short(text: str, limit: int = 80) -> str:
    """One line, at most ``limit`` characters, for titles."""
    first, _, rest = text.strip().partition("\n")
    if rest or len(first) > limit:
        return first[: limit - 1].rstrip() + "…"
    return first


# ------------------------------------------------------------------------ files


def _read_local(path: str, real: str) -> Decoded | None:
    """The decoded content of ``real`` (the checked form of ``path``), or ``None`` when
    it does not exist."""
    try:
        data = read_checked(real)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory, not a file") from None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode(data)


def _write_local(path: str, real: str, data: bytes) -> None:
    if os.path.isdir(real):
        raise ToolError(f"{path} is a directory, not a file")
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
        write_checked(real, data)
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None


async def read_text(ctx: ToolContext, path: str, *, missing_ok: bool = False) -> Decoded | None:
    """The whole text of ``path`` (absolute): from the editor when it offers
    ``fs/read_text_file`` (its unsaved buffers win; the text is the editor's), else from
    disk, decoded losslessly (:mod:`.textcodec`; check ``binary``).

    A missing file raises :class:`ToolError`. With ``missing_ok`` (the old text of a file
    about to be overwritten) it returns ``None`` instead and falls back to the disk when
    the editor fails.
    """
    if missing_ok and not await asyncio.to_thread(os.path.lexists, ctx.real(path)):
        return None  # a new file: never ask the editor for what does not exist (it logs errors)
    if ctx.client.allows("fs/read_text_file"):
        try:
            response = await ctx.client.call(
                "fs/read_text_file",
                t.ReadTextFileRequest(session_id=ctx.session_id, path=path),
                t.ReadTextFileResponse,
            )
            return Decoded(str(response.content))
        except RemoteError as exc:
            if missing_ok:
                return await asyncio.to_thread(_read_local, path, ctx.real(path))
            raise ToolError(f"the editor could not read {path}: {exc.message}") from None
    text = await asyncio.to_thread(_read_local, path, ctx.real(path))
    if text is None and not missing_ok:
        raise ToolError(f"file not found: {path}")
    return text


async def write_text(ctx: ToolContext, path: str, content: str,
                     original: Decoded | None = None) -> None:  # fmt: skip
    """Write ``path`` (absolute) through the editor's ``fs/write_text_file`` when offered,
    else to disk (creating parent directories) in the form of the ``original`` it was
    read as (its encoding, byte-order mark, undecodable bytes), by default UTF-8."""
    if ctx.client.allows("fs/write_text_file"):
        if ESCAPED.search(content):
            raise ToolError(
                f"{path} has bytes that are not UTF-8, and the editor's write would replace "
                "them; nothing was written. Edit it with run_command instead.")
        try:
            await ctx.client.call(
                "fs/write_text_file",
                t.WriteTextFileRequest(session_id=ctx.session_id, path=path, content=content),
                t.WriteTextFileResponse | None,  # type: ignore[arg-type]
            )
        except RemoteError as exc:
            raise ToolError(f"the editor could not write {path}: {exc.message}") from None
        return
    try:
        data = (original or Decoded("")).encode(content)
    except UnicodeEncodeError:
        assert original is not None
        bad = "".join(c for c in dict.fromkeys(content) if not original.holds(c))
        raise ToolError(
            f"{path} is {original.describe()} text, which cannot hold {bad!r} of the new "
            "text; nothing was written. Use characters that encoding has, or rewrite the "
            "whole file with write_file (which writes UTF-8).") from None
    await asyncio.to_thread(_write_local, path, ctx.real(path), data)


# ------------------------------------------------------------------------ globs

_GLOB_CHARS = re.compile(r"[*?\[{]")


def has_magic(segment: str) -> bool:
    return _GLOB_CHARS.search(segment) is not None


def _segment_regex(seg: str) -> str:
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = seg.find("]", i + 2 if i + 1 < n and seg[i + 1] in "!^" else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = seg[i + 1 : j]
                neg = body[:1] in ("!", "^")
                body = body[1:] if neg else body
                out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "{":
            j = seg.find("}", i)
            if j < 0:
                out.append(re.escape(c))
            else:
                alts = seg[i + 1 : j].split(",")
                out.append("(?:" + "|".join(_segment_regex(a) for a in alts) + ")")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=128)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for ``/``-separated relative paths: ``*``, ``?``, ``[...]``, ``{a,b}``
    within one segment; ``**`` spans any number of directories."""
    segments = [s for s in pattern.strip("/").split("/") if s not in ("", ".")]
    parts: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment_regex(seg) + ("" if last else "/"))
    return re.compile("^" + "".join(parts) + "$", re.DOTALL)


def split_glob(base: str, pattern: str) -> tuple[str, str]:
    """Move literal leading segments of ``pattern`` (or an absolute prefix) into ``base``."""
    if os.path.isabs(pattern):
        base, pattern = os.sep, pattern.lstrip("/")
    segments = pattern.split("/")
    i = 0
    while i < len(segments) - 1 and not has_magic(segments[i]):
        i += 1
    literal = [s for s in segments[:i] if s]
    return os.path.normpath(os.path.join(base, *literal)), "/".join(segments[i:])
