"""apply_patch: the edit tool of OpenAI's GPT-5 and codex models (in place of edit_file,
write_file and move_file; see ``providers.models`` ``tool_style``), in the codex patch
format (:mod:`._patch`).

One call, one ``tool_call``: the whole patch is worked out before it is approved (every
file read and every hunk found, ``prepare``), the user is shown every file's diff, and
the permission policy judges every path it touches (added, updated, deleted, moved from
and to) as it judges edits. A patch that does not apply is an error naming the file and
the hunk, and nothing is written. Files are written through the same seam as
write_file and edit_file (``_common.write_text``: the editor's ``fs/write_text_file``
when it offers it, else the disk, each file's encoding and line endings kept);
deletions and moves happen on the local disk (ACP has no method for them).

On the Responses API the tool is offered as a custom tool whose input is the patch
itself, constrained by its grammar (:data:`GRAMMAR`); elsewhere as a function taking the
patch as ``input``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated

from msgspec import Meta

from ..errors import ToolError
from ..protocol import types as t
from . import _patch
from ._common import read_text, write_text
from ._safe import unlink_checked
from .base import Arguments, BuiltinTool, CallInfo, Preview, ToolContext, ToolKind, ToolOutput
from .budget import plural
from .textcodec import Decoded, visible

#: The patch format as a Lark grammar: what the Responses API holds a custom tool's input
#: to (the format of :mod:`._patch`).
GRAMMAR = r"""start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?
hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?
filename: /(.+)/
add_line: "+" /(.*)/ LF -> line
change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF
%import common.LF
"""

DESCRIPTION = """\
Edit files with a patch: add, update, delete or move files, several in one patch. The \
whole patch is checked first: if a hunk does not match, nothing is changed and the error \
names the file and the hunk. Paths are relative to the workspace (or absolute).

*** Begin Patch
*** Add File: path/new.py
+every line of the new file, each after a +
*** Update File: path/old.py
*** Move to: path/renamed.py   (optional)
@@ def the_function():   (a line above the change, to find it; or a bare @@)
 a context line, unchanged (starts with a space)
-a line removed
+a line added
*** Delete File: path/gone.py
*** End Patch

Give about 3 lines of context above and below each change; when they are not unique, \
add @@ lines naming the class or function (several @@ lines narrow it down). \
"*** End of File" after a hunk's lines anchors it at the end of the file. Files keep \
their encoding and line endings."""


class ApplyPatchArgs(Arguments):
    input: Annotated[str, Meta(min_length=1, description="The patch, from `*** Begin Patch` "
                                                         "to `*** End Patch`.")]  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Change:
    op: _patch.FileOp
    path: str
    """Absolute: the file read (updated, deleted) or written (added)."""
    target: str
    """Absolute: where the new content goes (``path``, or the move's destination)."""
    old: Decoded | None
    new: str | None
    """``None``: the file is deleted."""


class ApplyPatch(BuiltinTool[ApplyPatchArgs]):
    name = "apply_patch"
    kind: ToolKind = "edit"
    arguments = ApplyPatchArgs
    streamed = ("input",)
    description = DESCRIPTION
    grammar = GRAMMAR

    def describe(self, args: ApplyPatchArgs, ctx: ToolContext) -> CallInfo:
        ops = _parsed(args)
        paths: list[str] = []
        for op in ops:
            paths.append(ctx.resolve(op.path))
            if op.move_to:
                paths.append(ctx.resolve(op.move_to))
        shown = ", ".join(dict.fromkeys(ctx.display(p) for p in paths))
        title = f"Patch {shown}" if len(shown) <= 120 else f"Patch {plural(len(paths), 'file')}"
        unique = tuple(dict.fromkeys(paths))
        return CallInfo(title, "write", unique, tuple(t.ToolCallLocation(path=p) for p in unique))

    async def prepare(self, args: ApplyPatchArgs, ctx: ToolContext) -> Preview:
        changes = [await _change(op, ctx) for op in _parsed(args)]
        return Preview([d for c in changes for d in _diffs(c)], changes)

    async def run(self, args: ApplyPatchArgs, ctx: ToolContext) -> ToolOutput:
        changes = ctx.prepared
        if not isinstance(changes, list):
            changes = (await self.prepare(args, ctx)).state
        done: list[str] = []
        for change in changes:
            try:
                await _apply(change, ctx)
            except ToolError as exc:
                if not done:
                    raise
                raise ToolError(f"{exc.message} (already done: {'; '.join(done)})") from None
            done.append(_summary(change, ctx))
        return ToolOutput(
            text="Applied the patch:\n" + "\n".join(done),
            content=[d for c in changes for d in _diffs(c)],
            raw_output={"files": [{"path": c.target, "op": c.op.kind,
                                   **({"from": c.path} if c.target != c.path else {})}
                                  for c in changes]},
            locations=[t.ToolCallLocation(path=c.target) for c in changes],
        )


def _parsed(args: ApplyPatchArgs) -> list[_patch.FileOp]:
    try:
        return _patch.parse(args.input)
    except _patch.PatchError as exc:
        raise ToolError(f"invalid patch: {exc}") from None


async def _change(op: _patch.FileOp, ctx: ToolContext) -> _Change:
    """One file's change, worked out (and refused, if it cannot be made)."""
    path = ctx.resolve(op.path)
    target = ctx.resolve(op.move_to) if op.move_to else path
    shown = ctx.display(path)
    if op.kind == "add":
        old = await read_text(ctx, path, missing_ok=True)
        return _Change(op, path, path, old, "\n".join(op.lines) + "\n")
    old = await read_text(ctx, path, missing_ok=True)
    if old is None:
        verb = "delete" if op.kind == "delete" else "update"
        raise ToolError(f"cannot {verb} {shown}: the file does not exist. Nothing was changed.")
    if op.kind == "delete":
        return _Change(op, path, path, old, None)
    if old.binary:
        raise ToolError(f"{shown} is a binary file; apply_patch edits text only. Nothing was "
                        "changed.")  # fmt: skip
    try:
        new = _patch.apply_hunks(old.text, op) if op.hunks else old.text
    except _patch.PatchError as exc:
        raise ToolError(str(exc)) from None
    return _Change(op, path, target, old, new)


def _diffs(change: _Change) -> list[t.Diff]:
    old = change.old.shown() if change.old is not None and not change.old.binary else None
    if change.new is None:
        return [t.Diff(path=change.path, old_text=old, new_text="")]
    diffs = [t.Diff(path=change.target, old_text=old, new_text=visible(change.new))]
    if change.target != change.path:
        diffs.append(t.Diff(path=change.path, old_text=old, new_text=""))
    return diffs


async def _apply(change: _Change, ctx: ToolContext) -> None:
    if change.new is not None:
        original = change.old if change.op.kind == "update" else None
        await write_text(ctx, change.target, change.new, original)
    if change.new is None or change.target != change.path:
        await asyncio.to_thread(_remove, change.path, ctx.real(change.path))


def _remove(path: str, real: str) -> None:
    try:
        unlink_checked(real)
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; apply_patch deletes files only") from None
    except OSError as exc:
        raise ToolError(f"cannot delete {path}: {exc.strerror or exc}") from None


def _summary(change: _Change, ctx: ToolContext) -> str:
    shown = ctx.display(change.path)
    if change.new is None:
        return f"D {shown}"
    if change.op.kind == "add":
        verb = "A" if change.old is None else "A (replaced)"
        return f"{verb} {shown} ({plural(len(change.op.lines), 'line')})"
    added = sum(h.added for h in change.op.hunks)
    removed = sum(h.removed for h in change.op.hunks)
    moved = f" → {ctx.display(change.target)}" if change.target != change.path else ""
    return f"M {shown}{moved} (+{added} -{removed} lines in " \
           f"{plural(len(change.op.hunks), 'hunk')})"  # fmt: skip

