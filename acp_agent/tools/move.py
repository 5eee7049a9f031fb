"""move_file: rename or move a file or directory (on the local disk: ACP has no method
for it), never over an existing path unless asked."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

from msgspec import Meta

from ..errors import ToolError
from ..protocol import types as t
from ._common import PathArg
from .base import Arguments, BuiltinTool, CallInfo, ToolContext, ToolKind, ToolOutput


class MoveFileArgs(Arguments):
    source: PathArg
    destination: PathArg
    overwrite: Annotated[bool, Meta(description="Replace an existing destination file.")] = False


def _move(source: str, destination: str, overwrite: bool) -> None:
    if not os.path.lexists(source):
        raise ToolError(f"not found: {source}")
    if os.path.lexists(destination) and not (overwrite and os.path.isfile(destination)):
        raise ToolError(f"{destination} exists; set overwrite (files only) to replace it")
    try:
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        os.replace(source, destination)
    except OSError as exc:
        raise ToolError(f"cannot move {source}: {exc.strerror or exc}") from None


class MoveFile(BuiltinTool[MoveFileArgs]):
    name = "move_file"
    kind: ToolKind = "move"
    arguments = MoveFileArgs
    description = (
        "Rename or move a file or directory (parent directories are created). Refuses to "
        "replace an existing path unless overwrite is true (files only)."
    )

    def describe(self, args: MoveFileArgs, ctx: ToolContext) -> CallInfo:
        source, destination = ctx.resolve(args.source), ctx.resolve(args.destination)
        title = f"Move {ctx.display(source)} → {ctx.display(destination)}"
        return CallInfo(title, "write", (source, destination),
                        (t.ToolCallLocation(path=destination),))  # fmt: skip

    async def run(self, args: MoveFileArgs, ctx: ToolContext) -> ToolOutput:
        source, destination = ctx.resolve(args.source), ctx.resolve(args.destination)
        await asyncio.to_thread(_move, source, destination, args.overwrite)
        return ToolOutput(
            text=f"Moved {ctx.display(source)} to {ctx.display(destination)}.",
            raw_output={"source": source, "destination": destination},
            locations=[t.ToolCallLocation(path=destination)],
        )
