"""apply_patch: the codex patch format parsed and applied, through the same seams as the
other edit tools (permission paths, the diff shown before approval, the editor's writes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools import _patch
from acp_agent.tools.base import ToolContext
from acp_agent.tools.patch import ApplyPatch

from .fake_client import MakeClient, wire
from .raw import Raw

patch_tool = Raw(ApplyPatch())


def P(*lines: str) -> dict[str, str]:
    return {"input": "\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n"}


async def apply(args: dict[str, str], ctx: ToolContext) -> str:
    """prepare then run, as the turn does."""
    tool = patch_tool.tool
    parsed = tool.parse(args)
    preview = await tool.prepare(parsed, ctx)
    assert preview is not None
    ctx.prepared = preview.state
    return (await tool.run(parsed, ctx)).text


async def test_add_update_delete_move_in_one_patch(ws: Path, fake: MakeClient) -> None:
    (ws / "old.txt").write_text("gone\n")
    (ws / "src" / "util.py").write_text("def a():\n    return 1\n\n\ndef b():\n    return 2\n")
    ctx = fake().context(str(ws))
    args = P("*** Add File: docs/new.md", "+# New", "+text",
             "*** Update File: src/app.py", "@@ def main():", "-    return os.getcwd()",
             "+    return os.getcwd() + '/'",
             "*** Update File: src/util.py", "*** Move to: src/helpers.py", "@@ def b():",
             "-    return 2", "+    return 3",
             "*** Delete File: old.txt")  # fmt: skip
    info = patch_tool.describe(args, ctx)
    assert info.access == "write"
    assert info.title == ("Patch docs/new.md, src/app.py, src/util.py, src/helpers.py, old.txt")
    assert set(info.paths) == {str(ws / p) for p in (
        "docs/new.md", "src/app.py", "src/util.py", "src/helpers.py", "old.txt")}
    text = await apply(args, ctx)
    assert (ws / "docs/new.md").read_text() == "# New\ntext\n"
    assert (ws / "src/app.py").read_text().endswith("    return os.getcwd() + '/'\n")
    assert not (ws / "src/util.py").exists() and not (ws / "old.txt").exists()
    assert (ws / "src/helpers.py").read_text().endswith("def b():\n    return 3\n")
    assert text.splitlines() == [
        "Applied the patch:", "A docs/new.md (2 lines)",
        "M src/app.py (+1 -1 lines in 1 hunk)",
        "M src/util.py → src/helpers.py (+1 -1 lines in 1 hunk)", "D old.txt"]


async def test_the_diff_of_every_file_comes_before_approval(ws: Path, fake: MakeClient) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    ctx = fake().context(str(ws))
    tool = patch_tool.tool
    preview = await tool.prepare(tool.parse(P(
        "*** Update File: a.txt", "@@", " one", "-two", "+2", "*** Add File: b.txt", "+b")), ctx)
    assert preview is not None
    assert wire(preview.content) == [
        {"type": "diff", "path": str(ws / "a.txt"), "oldText": "one\ntwo\n", "newText": "one\n2\n"},
        {"type": "diff", "path": str(ws / "b.txt"), "oldText": None, "newText": "b\n"}]
    assert (ws / "a.txt").read_text() == "one\ntwo\n" and not (ws / "b.txt").exists()


async def test_a_hunk_that_does_not_apply_names_it_and_nothing_is_written(
    ws: Path, fake: MakeClient
) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "b.py").write_text("class A:\n    def m(self):\n        return 1\n")
    ctx = fake().context(str(ws))
    args = P("*** Update File: a.txt", "-alpha", "+ALPHA",
             "*** Update File: b.py", "@@ class A:", " def m(self):", "-    return 2",
             "+    return 3")  # fmt: skip
    with pytest.raises(ToolError) as caught:
        await apply(args, ctx)
    assert caught.value.message == (
        "b.py, hunk 1 (`@@ class A:`): these lines (context and removed) were not found "
        "after line 1:\n  def m(self):\n      return 2\nNothing was changed. Read the file "
        "again and make the hunk's context and '-' lines match it exactly.")
    assert (ws / "a.txt").read_text() == "alpha\nbeta\n"  # the first file was not written
    with pytest.raises(ToolError, match=r"cannot update missing\.txt: the file does not exist"):
        await apply(P("*** Update File: missing.txt", "-x", "+y"), ctx)
    with pytest.raises(ToolError, match=r"cannot delete nope\.txt"):
        await apply(P("*** Delete File: nope.txt"), ctx)


@pytest.mark.parametrize(("patch", "message"), [
    ("*** Update File: a\n-x\n", "a patch starts with `*** Begin Patch`"),
    ("*** Begin Patch\n*** Add File: a\n+x\n", "a patch ends with `*** End Patch`"),
    ("*** Begin Patch\n*** End Patch\n", "the patch changes no file"),
    ("*** Begin Patch\n*** Frobnicate: a\n*** End Patch\n", "line 2 of the patch: expected"),
    ("*** Begin Patch\n*** Update File: a\n*** End Patch\n", "has no hunk"),
    ("*** Begin Patch\n*** Update File: a\n@@\n?x\n*** End Patch\n",
     "line 4 of the patch (in a): a hunk line starts with"),
    ("*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n", "`*** Add File:` needs a path"),
])  # fmt: skip
async def test_malformed_patches_are_refused_before_anything(
    patch: str, message: str, ws: Path, fake: MakeClient
) -> None:
    with pytest.raises(ToolError) as caught:
        patch_tool.describe({"input": patch}, fake().context(str(ws)))
    assert caught.value.message.startswith("invalid patch: ") and message in caught.value.message


def test_matching_tolerates_whitespace_and_typography_and_keeps_line_endings() -> None:
    update = _patch.parse("*** Begin Patch\n*** Update File: f\n@@ def f():\n"
                          "-    x = 'a-b'  \n+    x = 'c'\n*** End Patch")[0]  # fmt: skip
    assert _patch.apply_hunks("def f():\r\n\tx = \u2018a\u2013b\u2019\r\n", update) == (
        "def f():\r\n    x = 'c'\r\n")
    nested = _patch.parse("*** Begin Patch\n*** Update File: f\n@@ class B:\n@@ def m():\n"
                          "-    pass\n+    return 2\n*** End Patch")[0]  # fmt: skip
    text = "class A:\n    def m():\n    pass\nclass B:\n    def m():\n    pass\n"
    assert _patch.apply_hunks(text, nested) == (
        "class A:\n    def m():\n    pass\nclass B:\n    def m():\n    return 2\n")
    tail = _patch.parse("*** Begin Patch\n*** Update File: f\n@@\n-x\n+y\n*** End of File\n"
                        "*** End Patch")[0]  # fmt: skip
    assert _patch.apply_hunks("x\nmid\nx", tail) == "x\nmid\ny\n"  # the last x, newline added
    added = _patch.parse("*** Begin Patch\n*** Update File: f\n@@\n+new last\n*** End Patch")[0]
    assert _patch.apply_hunks("a\n", added) == "a\nnew last\n"
    wrapped = _patch.parse("apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: f\n"
                           "*** End Patch\nEOF\n")  # fmt: skip
    assert wrapped[0].kind == "delete"


async def test_written_through_the_editor_when_it_offers_writes(
    ws: Path, fake: MakeClient
) -> None:
    """The same seam as write_file and edit_file: the editor's fs/write_text_file."""
    client = fake(read=True, write=True)
    ctx = client.context(str(ws))
    await apply(P("*** Update File: README.md", "@@", " # Demo", "-hello world",
                  "+hello patch"), ctx)  # fmt: skip
    assert client.methods == ["fs/read_text_file", "fs/write_text_file"]
    assert client.files[str(ws / "README.md")] == "# Demo\nhello patch\n"


async def test_binary_files_are_refused(ws: Path, fake: MakeClient) -> None:
    (ws / "b.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary file"):
        await apply(P("*** Update File: b.bin", "-x", "+y"), fake().context(str(ws)))
