"""move_file: the tool that proved the seam (one module, one registry line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_agent.errors import ToolError
from acp_agent.tools.move import MoveFile

from .fake_client import FakeClient
from .raw import Raw

move = Raw(MoveFile())


async def test_moves_and_creates_parents(ws: Path, fake) -> None:  # type: ignore[no-untyped-def]
    ctx = fake().context(str(ws))
    out = await move.run({"source": "README.md", "destination": "docs/intro.md"}, ctx)
    assert (ws / "docs" / "intro.md").read_text() == "# Demo\nhello world\n"
    assert not (ws / "README.md").exists()
    assert out.text == "Moved README.md to docs/intro.md."


def test_describe_covers_both_paths(ws: Path) -> None:
    ctx = FakeClient().context(str(ws))
    info = move.describe({"source": "src/app.py", "destination": "/elsewhere/app.py"}, ctx)
    assert info.title == "Move src/app.py → /elsewhere/app.py"
    assert info.access == "write" and info.paths == (str(ws / "src/app.py"), "/elsewhere/app.py")
    assert not all(ctx.inside_roots(p) for p in info.paths)  # so it asks, in every mode


async def test_refuses_to_replace_unless_asked(ws: Path, fake) -> None:  # type: ignore[no-untyped-def]
    ctx = fake().context(str(ws))
    (ws / "b.txt").write_text("b")
    (ws / "a.txt").write_text("a")
    with pytest.raises(ToolError, match="exists; set overwrite"):
        await move.run({"source": "a.txt", "destination": "b.txt"}, ctx)
    await move.run({"source": "a.txt", "destination": "b.txt", "overwrite": True}, ctx)
    assert (ws / "b.txt").read_text() == "a"
    with pytest.raises(ToolError, match="exists"):  # never over a directory
        await move.run({"source": "b.txt", "destination": "src", "overwrite": True}, ctx)
    with pytest.raises(ToolError, match="not found"):
        await move.run({"source": "gone.txt", "destination": "x.txt"}, ctx)
