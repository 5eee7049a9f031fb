"""Fixtures for the built-in tool tests: a workspace and recording fake clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .fake_client import FakeClient, MakeClient


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The session cwd / root: a small project."""
    d = (tmp_path / "ws").resolve()
    (d / "src").mkdir(parents=True)
    (d / "src" / "app.py").write_text("import os\n\n\ndef main():\n    return os.getcwd()\n")
    (d / "README.md").write_text("# Demo\nhello world\n")
    return d


@pytest.fixture
async def fake() -> AsyncIterator[MakeClient]:
    """``fake(read=..., write=..., terminal=..., files=...)`` → a FakeClient (closed after)."""
    made: list[FakeClient] = []

    def make(**kw: Any) -> FakeClient:
        client = FakeClient(**kw)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
